set -eo pipefail
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
cat > work.sql <<'SQL'
UPDATE customers SET email = lower(trim(email)) WHERE email <> lower(trim(email));
UPDATE orders o SET customer_id = k.keep
FROM (SELECT id, min(id) OVER (PARTITION BY email) AS keep FROM customers) k
WHERE o.customer_id = k.id AND k.id <> k.keep;
DELETE FROM customers c USING customers k WHERE k.email = c.email AND k.id < c.id;
ALTER TABLE customers ADD CONSTRAINT customers_email_key UNIQUE (email);
SQL
tools postgres pg-execute-sql sql=@work.sql > /dev/null
tools postgres pg-execute-query operation=select query="SELECT count(*) AS customers, count(DISTINCT email) AS emails FROM customers" | rows
