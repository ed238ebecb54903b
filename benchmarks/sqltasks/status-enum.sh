set -eo pipefail
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
cat > work.sql <<'SQL'
CREATE TYPE order_status AS ENUM ('pending', 'paid', 'shipped', 'delivered', 'cancelled');
UPDATE orders SET status = lower(trim(status)) WHERE status <> lower(trim(status));
ALTER TABLE orders ALTER COLUMN status TYPE order_status USING status::order_status;
SQL
tools postgres pg-execute-sql sql=@work.sql > /dev/null
tools postgres pg-execute-query operation=select query="SELECT status, count(*) FROM orders GROUP BY status ORDER BY status" | rows
