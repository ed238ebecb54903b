"""The shop the PostgreSQL tasks work on: five tables, about 12,000 rows, the same on every run.

`data()` makes the rows in Python from a fixed seed (nothing is downloaded); a task may change them
before they are loaded (its `setup`, as MCPMark's prepare_environment does); `load()` writes them into
an empty database; the verifiers compute what is expected from the same Python rows, never from
the database the agent changed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg

CENT = Decimal("0.01")
COUNTRIES = {
    "Germany": ["Berlin", "Munich", "Hamburg"],
    "France": ["Paris", "Lyon", "Lille"],
    "Spain": ["Madrid", "Seville", "Valencia"],
    "Italy": ["Rome", "Milan", "Turin"],
    "Poland": ["Warsaw", "Krakow"],
    "Portugal": ["Lisbon", "Porto"],
}
FIRST = ["Ada", "Ben", "Cleo", "Dan", "Eva", "Finn", "Gia", "Hugo", "Ines", "Jon", "Kim", "Leo", "Mia", "Nils"]
LAST = ["Berg", "Costa", "Duval", "Evans", "Fischer", "Garcia", "Horn", "Ivanova", "Jansen", "Klein", "Lopez"]
CATEGORIES = ["audio", "cables", "cameras", "garden", "kitchen", "office", "toys", "tools"]
NOUNS = ["Set", "Kit", "Pack", "Box", "Pro", "Mini", "Max", "Lite"]
STATUSES = ["delivered"] * 70 + ["shipped"] * 10 + ["paid"] * 8 + ["pending"] * 7 + ["cancelled"] * 5
PAID = ("paid", "shipped", "delivered")
START = datetime(2026, 1, 1)

SCHEMA = """
CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, email text NOT NULL,
  city text NOT NULL, country text NOT NULL, signed_up date NOT NULL);
CREATE TABLE products (id integer PRIMARY KEY, sku text NOT NULL UNIQUE, name text NOT NULL,
  category text NOT NULL, price numeric(8,2) NOT NULL, stock integer NOT NULL);
CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer NOT NULL REFERENCES customers(id),
  ordered_at timestamp NOT NULL, status text NOT NULL);
CREATE TABLE order_items (id integer PRIMARY KEY, order_id integer NOT NULL,
  product_id integer NOT NULL REFERENCES products(id), quantity integer NOT NULL, unit_price numeric(8,2) NOT NULL);
CREATE TABLE payments (id integer PRIMARY KEY, order_id integer NOT NULL, amount numeric(10,2) NOT NULL,
  paid_at timestamp NOT NULL, method text NOT NULL);
"""
COLUMNS = {
    "customers": ("id", "name", "email", "city", "country", "signed_up"),
    "products": ("id", "sku", "name", "category", "price", "stock"),
    "orders": ("id", "customer_id", "ordered_at", "status"),
    "order_items": ("id", "order_id", "product_id", "quantity", "unit_price"),
    "payments": ("id", "order_id", "amount", "paid_at", "method"),
}


@dataclass
class Shop:
    """The rows of each table, as tuples in `COLUMNS` order, by table."""

    tables: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)

    def rows(self, table: str) -> list[dict[str, Any]]:
        return [dict(zip(COLUMNS[table], row, strict=True)) for row in self.tables[table]]

    def items_total(self) -> dict[int, Decimal]:
        """Each order's sum of quantity × unit_price (orders without items are absent)."""
        totals: dict[int, Decimal] = {}
        for item in self.rows("order_items"):
            totals[item["order_id"]] = totals.get(item["order_id"], Decimal(0)) + item["quantity"] * item["unit_price"]
        return totals


def data() -> Shop:
    """The shop's rows, from a fixed seed: 300 customers, 96 products, 2,400 orders and their items
    and payments."""
    rng = random.Random(32)
    customers = []
    for i in range(1, 301):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        country = rng.choice(sorted(COUNTRIES))
        signed = date(2025, 1, 1) + timedelta(days=rng.randrange(365))
        email = f"{first}.{last}{i}@example.com".lower()
        customers.append((i, f"{first} {last}", email, rng.choice(COUNTRIES[country]), country, signed))
    products = []
    for i in range(1, 97):
        category = CATEGORIES[(i - 1) % len(CATEGORIES)]
        name = f"{category.capitalize()} {rng.choice(NOUNS)} {i}"
        price = (Decimal(rng.randrange(199, 19999)) / 100).quantize(CENT)
        products.append((i, f"{category[:3].upper()}-{i:03d}", name, category, price, rng.randrange(0, 60)))
    orders, items, payments = [], [], []
    moments = sorted(START + timedelta(minutes=rng.randrange(181 * 24 * 60)) for _ in range(2400))
    for i, moment in enumerate(moments, start=1):
        status = rng.choice(STATUSES)
        orders.append((i, rng.randrange(1, 301), moment, status))
        total = Decimal(0)
        for product in rng.sample(products, rng.randrange(1, 5)):
            price = product[4] if rng.random() < 0.8 else (product[4] * Decimal("0.9")).quantize(CENT)
            quantity = rng.randrange(1, 6)
            items.append((len(items) + 1, i, product[0], quantity, price))
            total += quantity * price
        # A tenth of the pending orders were paid but never moved on (the stale-pending task leaves them).
        if status in PAID or (status == "pending" and rng.random() < 0.1):
            paid_at = moment + timedelta(hours=rng.randrange(1, 48))
            payments.append((len(payments) + 1, i, total, paid_at, rng.choice(["card", "paypal", "transfer"])))
    return Shop(
        {"customers": customers, "products": products, "orders": orders, "order_items": items, "payments": payments}
    )


def load(url: str, shop: Shop) -> None:
    """Create the tables in the (empty) database at `url` and copy the rows in."""
    with psycopg.connect(url) as conn:
        conn.execute(SCHEMA)
        with conn.cursor() as cur:
            for table, columns in COLUMNS.items():
                with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                    for row in shop.tables[table]:
                        copy.write_row(row)
        conn.execute("ANALYZE")


def database_url(server: str, name: str) -> str:
    """`server`'s URL with its database swapped for `name` (query options such as `host=` kept)."""
    base, _, query = server.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


def create(server: str, name: str, shop: Shop) -> str:
    """A new database `name` on `server` holding `shop`; its URL."""
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = database_url(server, name)
    load(url, shop)
    return url


def drop(server: str, name: str) -> None:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
