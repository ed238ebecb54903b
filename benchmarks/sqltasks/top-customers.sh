set -eo pipefail
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
cat > work.sql <<'SQL'
CREATE TABLE top_customers (rank integer, customer_id integer, name text, country text, revenue numeric(12,2));
INSERT INTO top_customers
SELECT row_number() OVER (ORDER BY sum(i.quantity * i.unit_price) DESC, c.id), c.id, c.name, c.country,
  sum(i.quantity * i.unit_price)
FROM customers c JOIN orders o ON o.customer_id = c.id JOIN order_items i ON i.order_id = o.id
WHERE o.status = 'delivered' GROUP BY c.id ORDER BY 1 LIMIT 10;
SQL
tools postgres pg-execute-sql sql=@work.sql > /dev/null
tools postgres pg-execute-query operation=select query="SELECT * FROM top_customers ORDER BY rank" | rows
