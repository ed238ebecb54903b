set -eo pipefail
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
cat > work.sql <<'SQL'
CREATE TABLE category_summary (category text, units integer, revenue numeric(12,2), customers integer,
  best_product text);
INSERT INTO category_summary
WITH sold AS (
  SELECT p.category, p.name, i.quantity, i.quantity * i.unit_price AS amount, o.customer_id
  FROM order_items i JOIN orders o ON o.id = i.order_id JOIN products p ON p.id = i.product_id
  WHERE o.status <> 'cancelled'),
best AS (
  SELECT DISTINCT ON (category) category, name
  FROM (SELECT category, name, sum(amount) AS revenue FROM sold GROUP BY 1, 2) s ORDER BY category, revenue DESC, name)
SELECT s.category, sum(s.quantity), sum(s.amount), count(DISTINCT s.customer_id), b.name
FROM sold s JOIN best b USING (category) GROUP BY s.category, b.name;
SQL
tools postgres pg-execute-sql sql=@work.sql > /dev/null
tools postgres pg-execute-query operation=select query="SELECT * FROM category_summary ORDER BY category" | rows
