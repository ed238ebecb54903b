set -eo pipefail
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
cat > work.sql <<'SQL'
ALTER TABLE products ADD COLUMN reorder boolean NOT NULL DEFAULT false;
UPDATE products p SET reorder = true
FROM (SELECT i.product_id, sum(i.quantity) AS sold FROM order_items i JOIN orders o ON o.id = i.order_id
      WHERE o.status <> 'cancelled' AND o.ordered_at >= '2026-06-01' AND o.ordered_at < '2026-07-01'
      GROUP BY i.product_id) s
WHERE s.product_id = p.id AND p.stock < s.sold;
SQL
tools postgres pg-execute-sql sql=@work.sql > /dev/null
tools postgres pg-execute-query operation=select query="SELECT count(*) FROM products WHERE reorder" | rows
