"""The PostgreSQL tasks. Each `_<name>` function is the direct way; `<name>.look.sh` and `<name>.sh`
are the toolshell way; `checks.verify_<name>` is the verifier.

The direct functions call the server's tools one per turn as a careful model would: the schema of
each table the task touches (`pg_manage_schema get_info`), the data the task depends on, the change
(one `pg_execute_sql` batch, the same SQL the script sends), then a query that checks it. An answer
comes from the results they read, as text. The scripts look at the same things, print only what
the model needs (jq), and do the change and its check in one call.
"""

from __future__ import annotations

import json
import random
from datetime import timedelta
from decimal import Decimal
from typing import Any

from sqltasks import checks
from sqltasks.task import Caller, PgTask
from sqltasks.world import Shop

ITEMS_TOTAL = "(SELECT order_id, sum(quantity * unit_price) AS total FROM order_items GROUP BY order_id)"


def rows(text: str) -> list[dict[str, Any]]:
    """The rows of a query result (`…\\n\\nResults:\\n[…]`); none for a statement."""
    _, found, body = text.partition("Results:\n")
    return json.loads(body) if found else []


async def look(call: Caller, *tables: str) -> None:
    for table in tables:
        await call("pg_manage_schema", {"operation": "get_info", "tableName": table})


async def select(call: Caller, query: str) -> list[dict[str, Any]]:
    return rows(await call("pg_execute_query", {"operation": "select", "query": query}))


async def execute(call: Caller, sql: str) -> str:
    return await call("pg_execute_sql", {"sql": sql})


STATUSES = "SELECT status, count(*) FROM orders GROUP BY status ORDER BY status"

MONTHLY = f"""CREATE TABLE monthly_revenue (month text, orders integer, revenue numeric(12,2), customers integer);
INSERT INTO monthly_revenue
SELECT to_char(o.ordered_at, 'YYYY-MM'), count(*), coalesce(sum(t.total), 0), count(DISTINCT o.customer_id)
FROM orders o LEFT JOIN {ITEMS_TOTAL} t ON t.order_id = o.id
WHERE o.status <> 'cancelled' GROUP BY 1;"""


async def _monthly_revenue(call: Caller) -> str:
    await look(call, "orders", "order_items")
    await select(call, STATUSES)
    await execute(call, MONTHLY)
    await select(call, "SELECT * FROM monthly_revenue ORDER BY month")
    return ""


TOP = """CREATE TABLE top_customers (rank integer, customer_id integer, name text, country text, revenue numeric(12,2));
INSERT INTO top_customers
SELECT row_number() OVER (ORDER BY sum(i.quantity * i.unit_price) DESC, c.id), c.id, c.name, c.country,
  sum(i.quantity * i.unit_price)
FROM customers c JOIN orders o ON o.customer_id = c.id JOIN order_items i ON i.order_id = o.id
WHERE o.status = 'delivered' GROUP BY c.id ORDER BY 1 LIMIT 10;"""


async def _top_customers(call: Caller) -> str:
    await look(call, "customers", "orders", "order_items")
    await select(call, STATUSES)
    await execute(call, TOP)
    await select(call, "SELECT * FROM top_customers ORDER BY rank")
    return ""


CATEGORIES = """CREATE TABLE category_summary (category text, units integer, revenue numeric(12,2), customers integer,
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
FROM sold s JOIN best b USING (category) GROUP BY s.category, b.name;"""


async def _category_summary(call: Caller) -> str:
    await look(call, "products", "orders", "order_items")
    await select(call, STATUSES)
    await execute(call, CATEGORIES)
    await select(call, "SELECT * FROM category_summary ORDER BY category")
    return ""


WITHOUT_ITEMS = (
    "SELECT count(*) AS without_items FROM orders o"
    " WHERE NOT EXISTS (SELECT 1 FROM order_items i WHERE i.order_id = o.id)"
)
TOTALS = """ALTER TABLE orders ADD COLUMN total numeric(10,2);
UPDATE orders o SET total = coalesce((SELECT sum(quantity * unit_price) FROM order_items i WHERE i.order_id = o.id), 0);
ALTER TABLE orders ALTER COLUMN total SET NOT NULL;
ALTER TABLE orders ADD CONSTRAINT orders_total_nonnegative CHECK (total >= 0);"""
TOTALS_CHECK = "SELECT count(*) AS orders, count(total) AS with_total, min(total), max(total), sum(total) FROM orders"


async def _order_totals(call: Caller) -> str:
    await look(call, "orders", "order_items")
    await select(call, WITHOUT_ITEMS)
    await execute(call, TOTALS)
    await select(call, TOTALS_CHECK)
    return ""


ENUM = """CREATE TYPE order_status AS ENUM ('pending', 'paid', 'shipped', 'delivered', 'cancelled');
UPDATE orders SET status = lower(trim(status)) WHERE status <> lower(trim(status));
ALTER TABLE orders ALTER COLUMN status TYPE order_status USING status::order_status;"""


async def _status_enum(call: Caller) -> str:
    await look(call, "orders")
    await select(call, STATUSES)
    await execute(call, ENUM)
    await select(call, STATUSES)
    return ""


DUPLICATES = (
    "SELECT lower(trim(email)) AS email, array_agg(id ORDER BY id) AS ids FROM customers"
    " GROUP BY 1 HAVING count(*) > 1 ORDER BY 1"
)
DEDUPE = """UPDATE customers SET email = lower(trim(email)) WHERE email <> lower(trim(email));
UPDATE orders o SET customer_id = k.keep
FROM (SELECT id, min(id) OVER (PARTITION BY email) AS keep FROM customers) k
WHERE o.customer_id = k.id AND k.id <> k.keep;
DELETE FROM customers c USING customers k WHERE k.email = c.email AND k.id < c.id;
ALTER TABLE customers ADD CONSTRAINT customers_email_key UNIQUE (email);"""
DEDUPE_CHECK = "SELECT count(*) AS customers, count(DISTINCT email) AS emails FROM customers"


async def _dedupe_customers(call: Caller) -> str:
    await look(call, "customers", "orders")
    await select(call, DUPLICATES)
    await execute(call, DEDUPE)
    await select(call, DEDUPE_CHECK)
    return ""


ORPHANS = (
    "SELECT count(*) AS orphans FROM order_items i WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = i.order_id)"
)
ORPHANS_FIX = """DELETE FROM order_items i WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = i.order_id);
ALTER TABLE order_items ADD CONSTRAINT order_items_order_id_fkey
  FOREIGN KEY (order_id) REFERENCES orders(id) ON DELETE CASCADE;
CREATE INDEX order_items_order_id_idx ON order_items (order_id);"""


async def _orphan_items(call: Caller) -> str:
    await look(call, "order_items")
    await select(call, ORPHANS)
    await execute(call, ORPHANS_FIX)
    await look(call, "order_items")  # the new constraint and index, as the server shows them
    return ""


STALE = (
    "o.status = 'pending' AND o.ordered_at < '2026-06-01'"
    " AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id)"
)
CANCEL = f"""CREATE TABLE order_audit (order_id integer, old_status text, new_status text,
  changed_at timestamp DEFAULT now());
WITH cancelled AS (UPDATE orders o SET status = 'cancelled' WHERE {STALE} RETURNING o.id)
INSERT INTO order_audit (order_id, old_status, new_status) SELECT id, 'pending', 'cancelled' FROM cancelled;"""


async def _stale_pending(call: Caller) -> str:
    await look(call, "orders", "payments")
    await select(call, STATUSES)
    await select(call, f"SELECT count(*) AS stale FROM orders o WHERE {STALE}")
    await execute(call, CANCEL)
    audit = await select(call, "SELECT count(*) AS logged, min(changed_at), max(changed_at) FROM order_audit")
    return str(audit[0]["logged"])


MISMATCH = f"""FROM payments p JOIN orders o ON o.id = p.order_id JOIN {ITEMS_TOTAL} t ON t.order_id = p.order_id
WHERE o.status = 'delivered' AND p.amount <> t.total"""
REPAY = f"""UPDATE payments p SET amount = t.total FROM orders o, {ITEMS_TOTAL} t
WHERE o.id = p.order_id AND t.order_id = p.order_id AND o.status = 'delivered' AND p.amount <> t.total;"""


async def _payment_mismatch(call: Caller) -> str:
    await look(call, "payments", "orders")
    wrong = await select(call, f"SELECT p.order_id, p.amount, t.total {MISMATCH} ORDER BY p.order_id")
    await execute(call, REPAY)
    await select(call, f"SELECT count(*) AS still_wrong {MISMATCH}")
    return ",".join(str(r["order_id"]) for r in wrong)


RESTOCK = """ALTER TABLE products ADD COLUMN reorder boolean NOT NULL DEFAULT false;
UPDATE products p SET reorder = true
FROM (SELECT i.product_id, sum(i.quantity) AS sold FROM order_items i JOIN orders o ON o.id = i.order_id
      WHERE o.status <> 'cancelled' AND o.ordered_at >= '2026-06-01' AND o.ordered_at < '2026-07-01'
      GROUP BY i.product_id) s
WHERE s.product_id = p.id AND p.stock < s.sold;"""


async def _restock(call: Caller) -> str:
    await look(call, "products", "orders", "order_items")
    await select(call, STATUSES)
    await execute(call, RESTOCK)
    marked = await select(call, "SELECT count(*) AS marked FROM products WHERE reorder")
    return str(marked[0]["marked"])


def _messy_statuses(shop: Shop) -> None:
    """Forty orders whose status was typed by hand: wrong case, spaces around it."""
    rng = random.Random(7)
    orders = shop.tables["orders"]
    shapes = [str.capitalize, str.upper, lambda s: f" {s}", lambda s: f"{s} ", lambda s: f"{s.capitalize()} "]
    for i in rng.sample(range(len(orders)), 40):
        oid, customer, at, status = orders[i]
        orders[i] = (oid, customer, at, rng.choice(shapes)(status))


def _duplicate_customers(shop: Shop) -> None:
    """Twelve customers signed up twice (the email in another case or with spaces; some orders on the
    second account), and fifteen more emails typed in the wrong case."""
    rng = random.Random(11)
    customers, orders = shop.tables["customers"], shop.tables["orders"]
    picked = rng.sample(range(len(customers)), 27)
    shapes = [str.upper, lambda s: f" {s}", lambda s: f"{s.capitalize()} ", str.title]
    for n, i in enumerate(picked[:12]):
        cid, name, email, city, country, signed = customers[i]
        twin = len(customers) + 1
        customers.append((twin, name, rng.choice(shapes)(email), city, country, signed + timedelta(days=30 + n)))
        theirs = [k for k, o in enumerate(orders) if o[1] == cid]
        for k in rng.sample(theirs, min(len(theirs), rng.randrange(1, 4))):
            orders[k] = (orders[k][0], twin, *orders[k][2:])
    for i in picked[12:]:
        row = customers[i]
        customers[i] = (*row[:2], rng.choice(shapes)(row[2]), *row[3:])


def _deleted_orders(shop: Shop) -> None:
    """Twenty orders deleted with their payments, their items left behind."""
    gone = set(random.Random(5).sample([o[0] for o in shop.tables["orders"]], 20))
    shop.tables["orders"] = [o for o in shop.tables["orders"] if o[0] not in gone]
    shop.tables["payments"] = [p for p in shop.tables["payments"] if p[1] not in gone]


def _wrong_payments(shop: Shop) -> None:
    """Nine payments of delivered orders recorded with the wrong amount."""
    rng = random.Random(9)
    delivered = {o[0] for o in shop.tables["orders"] if o[3] == "delivered"}
    payments = shop.tables["payments"]
    for i in rng.sample([k for k, p in enumerate(payments) if p[1] in delivered], 9):
        pid, order, amount, at, method = payments[i]
        change = Decimal(rng.randrange(100, 2000)) / 100
        payments[i] = (pid, order, amount - change if amount > 2 * change else amount + change, at, method)


TASKS = [
    PgTask(
        "monthly-revenue",
        "report table",
        "Create a table monthly_revenue (month text as 'YYYY-MM', orders integer, revenue numeric(12,2),"
        " customers integer): one row per month with orders, counting the orders that are not cancelled,"
        " their items totals and the distinct customers who placed them.",
        _monthly_revenue,
        checks.verify_monthly_revenue,
    ),
    PgTask(
        "top-customers",
        "ranking across tables",
        "Create a table top_customers (rank integer, customer_id integer, name text, country text,"
        " revenue numeric(12,2)): the 10 customers whose delivered orders' items totals are the highest,"
        " ranked 1 to 10, a tie going to the lower customer id.",
        _top_customers,
        checks.verify_top_customers,
    ),
    PgTask(
        "category-summary",
        "report across four tables",
        "Create a table category_summary (category text, units integer, revenue numeric(12,2), customers"
        " integer, best_product text): per product category, over the orders that are not cancelled, the"
        " units sold, their revenue (quantity × unit_price), the distinct customers who bought them and the"
        " name of the product with the most revenue (a tie going to the first name alphabetically).",
        _category_summary,
        checks.verify_category_summary,
    ),
    PgTask(
        "order-totals",
        "schema change and backfill",
        "Add a column total numeric(10,2) to orders holding each order's items total (0 for an order without"
        " items), make it NOT NULL, and add a check constraint orders_total_nonnegative (total >= 0).",
        _order_totals,
        checks.verify_order_totals,
    ),
    PgTask(
        "status-enum",
        "type change with a data fix",
        "Some orders.status values were typed in another case or with spaces around them. Create an enum"
        " type order_status ('pending', 'paid', 'shipped', 'delivered', 'cancelled', in that order) and change"
        " orders.status to it, keeping every order's status.",
        _status_enum,
        checks.verify_status_enum,
        _messy_statuses,
    ),
    PgTask(
        "dedupe-customers",
        "merge duplicates, add a constraint",
        "Make every customer email lower case without spaces around it. Where two customers then share an"
        " email, keep the one with the lower id, move the other's orders to it and delete the other. Then add"
        " a unique constraint customers_email_key on customers(email).",
        _dedupe_customers,
        checks.verify_dedupe_customers,
        _duplicate_customers,
    ),
    PgTask(
        "orphan-items",
        "clean up, foreign key, index",
        "Some order_items belong to orders that no longer exist: delete them. Then add a foreign key"
        " order_items_order_id_fkey from order_items(order_id) to orders(id) with ON DELETE CASCADE, and an"
        " index order_items_order_id_idx on order_items(order_id).",
        _orphan_items,
        checks.verify_orphan_items,
        _deleted_orders,
    ),
    PgTask(
        "stale-pending",
        "data fix with an audit table",
        "Cancel every order that is still pending, was placed before 2026-06-01 and has no payment. Log each"
        " change in a new table order_audit (order_id integer, old_status text, new_status text, changed_at"
        " timestamp default now()). Answer with the number of orders cancelled.",
        _stale_pending,
        checks.verify_stale_pending,
    ),
    PgTask(
        "payment-mismatch",
        "find and fix, answer",
        "Some payments of delivered orders do not match their order's items total. Set each such payment's"
        " amount to the total, and answer with those orders' ids, ascending, separated by commas.",
        _payment_mismatch,
        checks.verify_payment_mismatch,
        _wrong_payments,
    ),
    PgTask(
        "restock",
        "new column from a report",
        "Add a column reorder boolean NOT NULL DEFAULT false to products and set it to true for every product"
        " whose stock is below the units of it sold in June 2026 (orders not cancelled). Answer with the"
        " number of products marked.",
        _restock,
        checks.verify_restock,
    ),
]
