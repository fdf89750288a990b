-- rows.sql — an allocation-heavy SQLite workload for the lab's default suite.
--
-- usage: sqlite3 :memory: -cmd ".parameter set @rows 100000" ".read rows.sql"
--
-- Builds an in-memory table of @rows rows (the page cache, B-tree pages and every
-- intermediate row go through the C malloc), indexes it, and runs aggregates, a join, a
-- sort and updates and deletes over it. Deterministic: rows come from a recursive CTE and
-- an integer hash, not from random().
PRAGMA cache_size = -65536;

CREATE TABLE items (
  id INTEGER PRIMARY KEY,
  grp INTEGER NOT NULL,
  name TEXT NOT NULL,
  price REAL NOT NULL,
  note TEXT
);

WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < @rows)
INSERT INTO items (id, grp, name, price, note)
SELECT n,
       (n * 2654435761) % 997,
       'item-' || ((n * 40503) % 100003) || '-' || substr('abcdefghijklmnopqrstuvwxyz', n % 26 + 1, 1 + n % 20),
       ((n * 7919) % 100000) / 100.0,
       CASE WHEN n % 3 = 0 THEN NULL ELSE printf('%0*d', 8 + n % 40, n) END
FROM seq;

CREATE INDEX items_grp ON items (grp, price);
CREATE INDEX items_name ON items (name);

CREATE TABLE groups AS
SELECT grp, count(*) AS n, avg(price) AS mean, max(length(name)) AS longest
FROM items GROUP BY grp;

SELECT 'groups', count(*), sum(n), round(sum(mean), 2) FROM groups;

SELECT 'join', count(*), round(sum(i.price - g.mean), 2)
FROM items i JOIN groups g ON g.grp = i.grp
WHERE i.price > g.mean;

SELECT 'top', group_concat(name, ',')
FROM (SELECT name FROM items ORDER BY price DESC, name LIMIT 50);

SELECT 'distinct', count(DISTINCT substr(name, 1, 9)) FROM items;

UPDATE items SET note = name || '/' || coalesce(note, '') WHERE grp % 5 = 0;
DELETE FROM items WHERE id % 7 = 0;
INSERT INTO items (grp, name, price, note)
SELECT grp, name || '+', price * 1.1, note FROM items WHERE id % 11 = 0;

SELECT 'final', count(*), round(sum(price), 2), sum(length(note)) FROM items;

SELECT 'window', count(*) FROM (
  SELECT id, rank() OVER (PARTITION BY grp ORDER BY price DESC) AS r FROM items
) WHERE r <= 3;
