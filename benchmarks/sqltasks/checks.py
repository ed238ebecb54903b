"""The verifiers: SQL queries on the database after the task, against what the task's Python rows say.

Each `verify_<task>(conn, shop, answer)` returns what is wrong (empty when the task was done): the
schema change as the catalog shows it (column types, constraints and indexes by their definitions,
and a constraint that must refuse a bad row is made to refuse one), and the data row for row. What is
expected is computed here from `shop` (the rows the database was loaded with), never read back from
the database the agent changed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from typing import Any

import psycopg

from sqltasks.world import CENT, Shop

Row = tuple[Any, ...]
JUNE = (datetime(2026, 6, 1), datetime(2026, 7, 1))
STALE_BEFORE = datetime(2026, 6, 1)
ENUM = ["pending", "paid", "shipped", "delivered", "cancelled"]


def fetch(conn: psycopg.Connection[Row], sql: str, *params: Any) -> list[Row]:
    with conn.cursor() as cur:
        cur.execute(sql, params or None)
        return cur.fetchall()


def same_rows(what: str, got: list[Row], want: list[Row]) -> list[str]:
    """One line naming the first row that differs, or nothing."""
    if got == want:
        return []
    at = next((i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w), min(len(got), len(want)))
    shown = (
        f"row {at + 1} is {got[at] if at < len(got) else 'missing'}, expected {want[at] if at < len(want) else 'none'}"
    )
    return [f"{what}: {len(got)} rows, expected {len(want)}; {shown}"]


def has_columns(conn: psycopg.Connection[Row], table: str, want: dict[str, str]) -> list[str]:
    """Each named column with its type as `format_type` writes it, `… not null` where asked."""
    found = fetch(
        conn,
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull FROM pg_attribute a"
        " JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'public' AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped",
        table,
    )
    if not found:
        return [f"no table {table}"]
    have = {name: (kind, notnull) for name, kind, notnull in found}
    problems = []
    for name, spec in want.items():
        kind = spec.removesuffix(" not null")
        if name not in have:
            problems.append(f"{table}.{name}: missing")
        elif have[name][0] != kind or (spec.endswith(" not null") and not have[name][1]):
            problems.append(f"{table}.{name}: {have[name][0]}{' not null' * have[name][1]}, expected {spec}")
    return problems


def constraint(conn: psycopg.Connection[Row], table: str, name: str) -> str | None:
    """The definition of constraint `name` on `table` (`pg_get_constraintdef`), or None."""
    found = fetch(
        conn,
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = to_regclass(%s) AND conname = %s",
        f"public.{table}",
        name,
    )
    return str(found[0][0]) if found else None


def _counted(orders: list[dict[str, Any]], keep: set[str]) -> list[dict[str, Any]]:
    return [o for o in orders if o["status"] in keep]


NOT_CANCELLED = {"pending", "paid", "shipped", "delivered"}


def verify_monthly_revenue(conn: psycopg.Connection[Row], shop: Shop, answer: str) -> list[str]:
    totals = shop.items_total()
    months: dict[str, list[Any]] = defaultdict(lambda: [0, Decimal(0), set()])
    for o in _counted(shop.rows("orders"), NOT_CANCELLED):
        m = months[o["ordered_at"].strftime("%Y-%m")]
        m[0] += 1
        m[1] += totals.get(o["id"], Decimal(0))
        m[2].add(o["customer_id"])
    want = [(k, n, rev.quantize(CENT), len(c)) for k, (n, rev, c) in sorted(months.items())]
    types = {"month": "text", "orders": "integer", "revenue": "numeric(12,2)", "customers": "integer"}
    problems = has_columns(conn, "monthly_revenue", types)
    sql = "SELECT month, orders, revenue, customers FROM monthly_revenue ORDER BY month"
    return problems or same_rows("monthly_revenue", fetch(conn, sql), want)


def verify_top_customers(conn: psycopg.Connection[Row], shop: Shop, answer: str) -> list[str]:
    totals = shop.items_total()
    spent: dict[int, Decimal] = defaultdict(Decimal)
    for o in _counted(shop.rows("orders"), {"delivered"}):
        spent[o["customer_id"]] += totals.get(o["id"], Decimal(0))
    people = {c["id"]: c for c in shop.rows("customers")}
    best = sorted(spent.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    want = [(i, cid, people[cid]["name"], people[cid]["country"], rev) for i, (cid, rev) in enumerate(best, start=1)]
    types = {"rank": "integer", "customer_id": "integer", "name": "text", "country": "text", "revenue": "numeric(12,2)"}
    problems = has_columns(conn, "top_customers", types)
    sql = "SELECT rank, customer_id, name, country, revenue FROM top_customers ORDER BY rank"
    return problems or same_rows("top_customers", fetch(conn, sql), want)


def verify_category_summary(conn: psycopg.Connection[Row], shop: Shop, answer: str) -> list[str]:
    products = {p["id"]: p for p in shop.rows("products")}
    counted = {o["id"]: o["customer_id"] for o in _counted(shop.rows("orders"), NOT_CANCELLED)}
    units: dict[str, int] = defaultdict(int)
    revenue: dict[str, Decimal] = defaultdict(Decimal)
    buyers: dict[str, set[int]] = defaultdict(set)
    by_product: dict[int, Decimal] = defaultdict(Decimal)
    for item in shop.rows("order_items"):
        if item["order_id"] not in counted:
            continue
        category = products[item["product_id"]]["category"]
        units[category] += item["quantity"]
        revenue[category] += item["quantity"] * item["unit_price"]
        buyers[category].add(counted[item["order_id"]])
        by_product[item["product_id"]] += item["quantity"] * item["unit_price"]
    want = []
    for category in sorted(units):
        ranked = sorted(
            (-rev, products[pid]["name"]) for pid, rev in by_product.items() if products[pid]["category"] == category
        )
        want.append((category, units[category], revenue[category], len(buyers[category]), ranked[0][1]))
    types = {"category": "text", "units": "integer", "revenue": "numeric(12,2)", "customers": "integer"}
    problems = has_columns(conn, "category_summary", types | {"best_product": "text"})
    sql = "SELECT category, units, revenue, customers, best_product FROM category_summary ORDER BY category"
    return problems or same_rows("category_summary", fetch(conn, sql), want)


def verify_order_totals(conn: psycopg.Connection[Row], shop: Shop, answer: str) -> list[str]:
    totals = shop.items_total()
    problems = has_columns(conn, "orders", {"total": "numeric(10,2) not null"})
    if problems:
        return problems
    want = [(o["id"], totals.get(o["id"], Decimal("0.00"))) for o in shop.rows("orders")]
    problems = same_rows("orders.total", fetch(conn, "SELECT id, total FROM orders ORDER BY id"), want)
    if constraint(conn, "orders", "orders_total_nonnegative") is None:
        return [*problems, "no constraint orders_total_nonnegative on orders"]
    return problems + _refuses(conn, "UPDATE orders SET total = -1 WHERE id = 1", "orders_total_nonnegative")


def _refuses(conn: psycopg.Connection[Row], sql: str, name: str) -> list[str]:
    """`sql` must fail on a check constraint (tried in a transaction that is rolled back)."""
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(sql)
    except psycopg.errors.CheckViolation:
        return []
    return [f"{name} let `{sql}` through"]


def verify_status_enum(conn: psycopg.Connection[Row], shop: Shop, answer: str) -> list[str]:
    labels = fetch(
        conn,
        "SELECT e.enumlabel FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid"
        " WHERE t.typname = 'order_status' ORDER BY e.enumsortorder",
    )
    if [label for (label,) in labels] != ENUM:
        return [f"enum order_status is {[label for (label,) in labels]}, expected {ENUM}"]
    problems = has_columns(conn, "orders", {"status": "order_status not null"})
    want = [(o["id"], o["status"].strip().lower()) for o in shop.rows("orders")]
    return problems or same_rows("orders.status", fetch(conn, "SELECT id, status::text FROM orders ORDER BY id"), want)


def verify_dedupe_customers(conn: psycopg.Connection[Row], shop: Shop, answer: str) -> list[str]:
    keeper: dict[str, int] = {}
    moved: dict[int, int] = {}
    for c in sorted(shop.rows("customers"), key=lambda c: c["id"]):
        email = c["email"].strip().lower()
        moved[c["id"]] = keeper.setdefault(email, c["id"])
    want_customers = [
        (c["id"], c["email"].strip().lower()) for c in shop.rows("customers") if moved[c["id"]] == c["id"]
    ]
    want_orders = [(o["id"], moved[o["customer_id"]]) for o in shop.rows("orders")]
    problems = same_rows("customers", fetch(conn, "SELECT id, email FROM customers ORDER BY id"), want_customers)
    problems += same_rows(
        "orders.customer_id", fetch(conn, "SELECT id, customer_id FROM orders ORDER BY id"), want_orders
    )
    found = constraint(conn, "customers", "customers_email_key")
    if found != "UNIQUE (email)":
        problems.append(f"customers_email_key is {found}, expected UNIQUE (email)")
    return problems


def verify_orphan_items(conn: psycopg.Connection[Row], shop: Shop, answer: str) -> list[str]:
    orders = {o["id"] for o in shop.rows("orders")}
    want = [(i["id"],) for i in shop.rows("order_items") if i["order_id"] in orders]
    problems = same_rows("order_items", fetch(conn, "SELECT id FROM order_items ORDER BY id"), want)
    fk = constraint(conn, "order_items", "order_items_order_id_fkey")
    if fk != "FOREIGN KEY (order_id) REFERENCES orders(id) ON DELETE CASCADE":
        problems.append(f"order_items_order_id_fkey is {fk}, expected a foreign key to orders(id) ON DELETE CASCADE")
    index = fetch(
        conn,
        "SELECT indexdef FROM pg_indexes WHERE tablename = 'order_items' AND indexname = %s",
        "order_items_order_id_idx",
    )
    if not index or not re.search(r'\(\s*"?order_id"?\s*\)$', str(index[0][0])):
        problems.append(
            f"index order_items_order_id_idx is {index[0][0] if index else None}, expected one on (order_id)"
        )
    return problems


def stale(shop: Shop) -> list[int]:
    """Pending orders placed before June with no payment: the ones the stale-pending task cancels."""
    paid = {p["order_id"] for p in shop.rows("payments")}
    return [
        o["id"]
        for o in shop.rows("orders")
        if o["status"] == "pending" and o["ordered_at"] < STALE_BEFORE and o["id"] not in paid
    ]


def verify_stale_pending(conn: psycopg.Connection[Row], shop: Shop, answer: str) -> list[str]:
    cancel = set(stale(shop))
    want = [(o["id"], "cancelled" if o["id"] in cancel else o["status"]) for o in shop.rows("orders")]
    problems = same_rows("orders.status", fetch(conn, "SELECT id, status FROM orders ORDER BY id"), want)
    types = {
        "order_id": "integer",
        "old_status": "text",
        "new_status": "text",
        "changed_at": "timestamp without time zone",
    }
    audit = has_columns(conn, "order_audit", types)
    if audit:
        return problems + audit
    got = fetch(
        conn, "SELECT order_id, old_status, new_status, changed_at IS NOT NULL FROM order_audit ORDER BY order_id"
    )
    problems += same_rows("order_audit", got, [(i, "pending", "cancelled", True) for i in sorted(cancel)])
    if answer != str(len(cancel)):
        problems.append(f"answer {answer!r} is not {len(cancel)!r}")
    return problems


def verify_payment_mismatch(conn: psycopg.Connection[Row], shop: Shop, answer: str) -> list[str]:
    totals = shop.items_total()
    delivered = {o["id"] for o in _counted(shop.rows("orders"), {"delivered"})}
    fixed = sorted(
        p["order_id"]
        for p in shop.rows("payments")
        if p["order_id"] in delivered and p["amount"] != totals[p["order_id"]]
    )
    want = [(p["id"], totals[p["order_id"]] if p["order_id"] in fixed else p["amount"]) for p in shop.rows("payments")]
    problems = same_rows("payments.amount", fetch(conn, "SELECT id, amount FROM payments ORDER BY id"), want)
    if answer != ",".join(map(str, fixed)):
        problems.append(f"answer {answer!r} is not {','.join(map(str, fixed))!r}")
    return problems


def june_units(shop: Shop) -> dict[int, int]:
    counted = {o["id"] for o in _counted(shop.rows("orders"), NOT_CANCELLED) if JUNE[0] <= o["ordered_at"] < JUNE[1]}
    units: dict[int, int] = defaultdict(int)
    for item in shop.rows("order_items"):
        if item["order_id"] in counted:
            units[item["product_id"]] += item["quantity"]
    return units


def verify_restock(conn: psycopg.Connection[Row], shop: Shop, answer: str) -> list[str]:
    units = june_units(shop)
    marked = [(p["id"],) for p in shop.rows("products") if p["stock"] < units.get(p["id"], 0)]
    problems = has_columns(conn, "products", {"reorder": "boolean not null"})
    if problems:
        return problems
    default = fetch(
        conn,
        "SELECT column_default FROM information_schema.columns"
        " WHERE table_name = 'products' AND column_name = 'reorder'",
    )
    if default != [("false",)]:
        problems.append(f"products.reorder defaults to {default[0][0] if default else None}, expected false")
    problems += same_rows(
        "products marked reorder", fetch(conn, "SELECT id FROM products WHERE reorder ORDER BY id"), marked
    )
    if answer != str(len(marked)):
        problems.append(f"answer {answer!r} is not {len(marked)!r}")
    return problems
