set -eo pipefail
rows() { sed '1,/^Results:$/d' | jq -r '.[] | [.[] | tostring] | @tsv'; }
cat > work.sql <<'SQL'
DELETE FROM order_items i WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = i.order_id);
ALTER TABLE order_items ADD CONSTRAINT order_items_order_id_fkey
  FOREIGN KEY (order_id) REFERENCES orders(id) ON DELETE CASCADE;
CREATE INDEX order_items_order_id_idx ON order_items (order_id);
SQL
tools postgres pg-execute-sql sql=@work.sql > /dev/null
tools postgres pg-manage-schema operation=get_info tableName=order_items | jq -r '.[-1].text | fromjson | .constraints[], .indexes[] | .definition'
