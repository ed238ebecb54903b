set -eo pipefail
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
cat > work.sql <<'SQL'
CREATE TABLE monthly_revenue (month text, orders integer, revenue numeric(12,2), customers integer);
INSERT INTO monthly_revenue
SELECT to_char(o.ordered_at, 'YYYY-MM'), count(*), coalesce(sum(t.total), 0), count(DISTINCT o.customer_id)
FROM orders o LEFT JOIN (SELECT order_id, sum(quantity * unit_price) AS total FROM order_items GROUP BY order_id) t ON t.order_id = o.id
WHERE o.status <> 'cancelled' GROUP BY 1;
SQL
tools postgres pg-execute-sql sql=@work.sql > /dev/null
tools postgres pg-execute-query operation=select query="SELECT * FROM monthly_revenue ORDER BY month" | rows
