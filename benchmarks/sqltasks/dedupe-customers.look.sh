set -eo pipefail
schema() { tools postgres pg-manage-schema operation=get_info tableName="$1" |
  jq -r '.[-1].text | fromjson | "\(.tableName): \([.columns[] | "\(.name) \(.dataType)"] | join(", "))"'; }
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
for t in customers orders; do schema $t; done
tools postgres pg-execute-query operation=select query='SELECT lower(trim(email)) AS email, array_agg(id ORDER BY id) AS ids FROM customers GROUP BY 1 HAVING count(*) > 1 ORDER BY 1' | rows
