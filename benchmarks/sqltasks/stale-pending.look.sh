set -eo pipefail
schema() { tools postgres pg-manage-schema operation=get_info tableName="$1" |
  jq -r '.[-1].text | fromjson | "\(.tableName): \([.columns[] | "\(.name) \(.dataType)"] | join(", "))"'; }
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
for t in orders payments; do schema $t; done
tools postgres pg-execute-query operation=select query='SELECT status, count(*) FROM orders GROUP BY status ORDER BY status' | rows
tools postgres pg-execute-query operation=select query="SELECT count(*) AS stale FROM orders o WHERE o.status = 'pending' AND o.ordered_at < '2026-06-01' AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id)" | rows
