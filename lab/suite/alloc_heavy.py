"""alloc_heavy.py — a pure-Python, allocation-heavy workload for the lab's default suite.

usage: python3 alloc_heavy.py [rounds]

The lab runs it with PYTHONMALLOC=malloc so that every Python object goes through the C
allocator under test (by default CPython serves small objects from its own arenas). Each
round builds and tears down the structures an interpreter-heavy program makes: a symbol
table of short strings, a tree of small tuples and lists, dictionaries that grow and shrink,
and a sort of records. Deterministic: the same output every run.
"""
import random
import sys


def words(rng, n):
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 12))) for _ in range(n)]


def build_tree(rng, depth):
    if depth == 0:
        return (rng.random(), str(rng.randint(0, 999)))
    return [build_tree(rng, depth - 1) for _ in range(rng.randint(2, 3))]


def tree_size(node):
    if isinstance(node, tuple):
        return 1
    return 1 + sum(tree_size(child) for child in node)


def symbol_table(rng, vocabulary):
    table = {}
    for i in range(60000):
        key = vocabulary[rng.randrange(len(vocabulary))] + "_" + str(i % 997)
        entry = table.get(key)
        if entry is None:
            table[key] = [i]
        else:
            entry.append(i)
        if i % 7 == 0 and table:
            victim = vocabulary[rng.randrange(len(vocabulary))] + "_" + str((i * 31) % 997)
            table.pop(victim, None)
    return len(table)


def records(rng, n):
    rows = [
        {"id": i, "name": "n%06d" % rng.randint(0, 10**6), "score": rng.random(),
         "tags": [rng.randint(0, 50) for _ in range(rng.randint(0, 4))]}
        for i in range(n)
    ]
    rows.sort(key=lambda r: (r["score"], r["name"]))
    groups = {}
    for r in rows:
        for t in r["tags"]:
            groups.setdefault(t, []).append(r["id"])
    return sum(len(v) for v in groups.values())


def text_work(vocabulary):
    text = " ".join(vocabulary * 3)
    parts = text.split(" ")
    joined = ",".join(p.upper() for p in parts if len(p) > 4)
    return len(joined)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    rng = random.Random(1234)
    checksum = 0
    for _ in range(rounds):
        vocabulary = words(rng, 8000)
        tree = build_tree(rng, 9)
        checksum += tree_size(tree)
        checksum += symbol_table(rng, vocabulary)
        checksum += records(rng, 20000)
        checksum += text_work(vocabulary)
        del tree
    print("alloc_heavy: rounds=%d checksum=%d" % (rounds, checksum))


if __name__ == "__main__":
    main()
