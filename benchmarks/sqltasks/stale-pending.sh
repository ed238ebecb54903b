set -eo pipefail
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
cat > work.sql <<'SQL'
CREATE TABLE order_audit (order_id integer, old_status text, new_status text,
  changed_at timestamp DEFAULT now());
WITH cancelled AS (UPDATE orders o SET status = 'cancelled' WHERE o.status = 'pending' AND o.ordered_at < '2026-06-01' AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id) RETURNING o.id)
INSERT INTO order_audit (order_id, old_status, new_status) SELECT id, 'pending', 'cancelled' FROM cancelled;
SQL
tools postgres pg-execute-sql sql=@work.sql > /dev/null
tools postgres pg-execute-query operation=select query="SELECT count(*) FROM order_audit" | rows
