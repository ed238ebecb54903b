set -eo pipefail
schema() { tools postgres pg-manage-schema operation=get_info tableName="$1" |
  jq -r '.[-1].text | fromjson | "\(.tableName): \([.columns[] | "\(.name) \(.dataType)"] | join(", "))"'; }
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
for t in orders; do schema $t; done
tools postgres pg-execute-query operation=select query='SELECT status, count(*) FROM orders GROUP BY status ORDER BY status' | rows
