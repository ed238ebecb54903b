set -eo pipefail
schema() { tools postgres pg-manage-schema operation=get_info tableName="$1" |
  jq -r '.[-1].text | fromjson | "\(.tableName): \([.columns[] | "\(.name) \(.dataType)"] | join(", "))"'; }
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
for t in order_items; do schema $t; done
tools postgres pg-execute-query operation=select query='SELECT count(*) AS orphans FROM order_items i WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = i.order_id)' | rows
