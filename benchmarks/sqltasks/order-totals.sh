set -eo pipefail
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
cat > work.sql <<'SQL'
ALTER TABLE orders ADD COLUMN total numeric(10,2);
UPDATE orders o SET total = coalesce((SELECT sum(quantity * unit_price) FROM order_items i WHERE i.order_id = o.id), 0);
ALTER TABLE orders ALTER COLUMN total SET NOT NULL;
ALTER TABLE orders ADD CONSTRAINT orders_total_nonnegative CHECK (total >= 0);
SQL
tools postgres pg-execute-sql sql=@work.sql > /dev/null
tools postgres pg-execute-query operation=select query="SELECT count(*) AS orders, count(total) AS with_total, min(total), max(total), sum(total) FROM orders" | rows
