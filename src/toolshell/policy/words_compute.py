"""The words of pure computation, for the heuristic rater (`policy.rating.computes_only`).

A tool whose name and description use only these words, and whose inputs are plain values, computes
something from its input and hands it back: arithmetic, formatting, conversion. `add` is a change verb
elsewhere (`add_label`, "Add a member"), so a tool reads as computation only when *every* word agrees:
one word outside this list (`issue`, `file`, `member`) and the ordinary rules decide.
"""

from __future__ import annotations

COMPUTE_VERBS = frozenset(
    "add sum subtract minus plus multiply times divide mod modulo power pow sqrt root square cube negate "
    "abs round floor ceil average mean median max min calculate calc compute convert "
    "format reformat parse encode decode escape unescape hash uppercase lowercase capitalize titlecase "
    "reverse sort slugify pad trim split join count tokenize".split()
)
COMPUTE_WORDS = COMPUTE_VERBS | frozenset(
    # operands and units
    "a an the two three two numbers number integers integer ints int floats float decimal decimals digits "
    "value values operand operands result results x y z n m b c sum difference product quotient remainder "
    "string strings text word words character characters char chars letter letters case date dates time "
    "times timestamp duration unit units celsius fahrenheit kelvin meters metres feet inches miles km kg "
    "pounds temperature length weight bytes hex binary base json csv yaml markdown percent percentage "
    "list array item items given input inputs output expression expressions math arithmetic "
    # glue
    "of to from into in and or by with as its it their given returns return returned gives give "
    "is are be that this these for each one".split()
)
TARGET_WORDS = frozenset(
    "path file files dir directory folder url uri link id ids key repo repository branch table db database "
    "record row user account email address host server channel issue message collection bucket queue "
    "topic project document doc page".split()
)
