set -eo pipefail
schema() { tools postgres pg-manage-schema operation=get_info tableName="$1" |
  jq -r '.[-1].text | fromjson | "\(.tableName): \([.columns[] | "\(.name) \(.dataType)"] | join(", "))"'; }
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
for t in orders order_items; do schema $t; done
tools postgres pg-execute-query operation=select query='SELECT count(*) AS without_items FROM orders o WHERE NOT EXISTS (SELECT 1 FROM order_items i WHERE i.order_id = o.id)' | rows
