set -eo pipefail
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
ids=$(tools postgres pg-execute-query operation=select query="SELECT p.order_id FROM payments p JOIN orders o ON o.id = p.order_id JOIN (SELECT order_id, sum(quantity * unit_price) AS total FROM order_items GROUP BY order_id) t ON t.order_id = p.order_id WHERE o.status = 'delivered' AND p.amount <> t.total ORDER BY p.order_id" | rows | paste -sd, -)
cat > work.sql <<'SQL'
UPDATE payments p SET amount = t.total FROM orders o, (SELECT order_id, sum(quantity * unit_price) AS total FROM order_items GROUP BY order_id) t
WHERE o.id = p.order_id AND t.order_id = p.order_id AND o.status = 'delivered' AND p.amount <> t.total;
SQL
tools postgres pg-execute-sql sql=@work.sql > /dev/null
tools postgres pg-execute-query operation=select query="SELECT count(*) AS still_wrong FROM payments p JOIN orders o ON o.id = p.order_id JOIN (SELECT order_id, sum(quantity * unit_price) AS total FROM order_items GROUP BY order_id) t ON t.order_id = p.order_id WHERE o.status = 'delivered' AND p.amount <> t.total" | rows
echo "$ids"
