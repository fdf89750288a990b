#!/usr/bin/env python3
"""check_layers.py — the layer rule of src/core (src/core/README.md), checked.

The core's files are layers in the order src/core/locus.c.h includes them. A file may call a
function (or use a function-like macro) defined in its own file or an earlier one; the one way
up is a hook of the design contract, declared in src/core/internal.h between its "design
contract" and "module map" banners. For every core file this lists each call to a function
defined in a later core file, or in a design's files, that is not a hook. Exit status 1 if
there is any.

  tools/check_layers.py [SRC]               check (SRC defaults to src/ beside this script)
  tools/check_layers.py --map [SRC]         print, per defining file, the functions other files call
  tools/check_layers.py --write-map [SRC]   rewrite internal.h's module map: their prototypes,
                                            by defining file (after adding or moving a function)
"""
import os, re, sys

def strip(text):
    """Comments, string and character literals blanked (line numbers kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('/*', i):
            j = text.find('*/', i + 2); j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j])); i = j
        elif text.startswith('//', i):
            j = text.find('\n', i); j = n if j < 0 else j
            out.append(' ' * (j - i)); i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + ' ' * (j - i - 1) + c); i = j + 1
        else:
            out.append(c); i += 1
    return ''.join(out)

ATTR = re.compile(r'__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)')
DEF = re.compile(r'^(?!#)[A-Za-z_][\w\s*]*?[\s*](\w+)\s*\(')
MACRO = re.compile(r'^\s*#\s*define\s+(\w+)\(')
CALL = re.compile(r'\b([A-Za-z_]\w*)\s*\(')
KEYWORDS = {'if', 'for', 'while', 'switch', 'return', 'sizeof', 'defined', '__attribute__',
            'alignof', '_Alignof', '__builtin_expect', 'typeof', '__typeof__', 'do'}

def definitions(text):
    """Names of the functions and function-like macros a file defines."""
    names = set()
    lines = text.split('\n')
    for k, line in enumerate(lines):
        m = MACRO.match(line)
        if m:
            if len(m.group(1)) > 1: names.add(m.group(1))
            continue
        if not line or line[0] in ' \t#}' or '(' not in line:
            continue
        rest = line
        j = k
        while '{' not in rest and ';' not in rest and j + 1 < len(lines):
            j += 1; rest += lines[j]
        if '{' not in rest or ('=' in rest.split('(')[0]):
            continue
        m = DEF.match(ATTR.sub('', line))
        if m and m.group(1) not in KEYWORDS:
            names.add(m.group(1))
    return names

def prototype(raw, stripped, name):
    """The prototype of `name` from its definition in a file (raw text, and the same stripped)."""
    lines, st = raw.split('\n'), stripped.split('\n')
    for k, l in enumerate(st):
        if not l or l[0] in ' \t#}' or not re.search(r'[\s*]%s\s*\(' % name, l):
            continue
        if ';' in l.split('{')[0] and '{' not in l:
            continue   # a forward declaration
        m = DEF.match(ATTR.sub('', l))
        if not m or m.group(1) != name:
            continue
        j, sig, flat = k, lines[k], l
        while '{' not in st[j]:
            j += 1
            sig += '\n' + lines[j]
            flat += '\n' + st[j]
        return sig[:flat.index('{')].rstrip() + ';'
    return None

def write_map(core, order, defined, where, others):
    path = os.path.join(core, 'internal.h')
    text = open(path).read()
    out = []
    for i, f in enumerate(order):
        if f == 'internal.h':
            continue
        raw = open(os.path.join(core, f)).read()
        used = sorted(n for n in defined[f] if where.get(n) == i and any(
            re.search(r'\b%s\s*\(' % n, t) for t in others(f)))
        if not used:
            continue
        head = re.search(r'/\* %s \S+ ([^:.;,(]*)' % re.escape(f), raw)
        out.append('\n/* ---- %s%s */' % (f, ': ' + head.group(1).strip() if head else ''))
        macros = [n for n in used if re.search(r'#\s*define\s+%s\(' % n, raw)]
        if macros:
            out.append('/* macros: %s */' % ', '.join(macros))
        for n in used:
            if n in macros or re.search(r'^LOCUS_API\b[^\n]*\b%s\s*\(' % n, raw, re.M):
                continue
            proto = prototype(raw, strip(raw), n)
            if proto:
                out.append(proto)
    mark = ' * order. Macros are named in a comment. */\n'
    a = text.index(mark) + len(mark)
    b = text.rindex('#endif')
    open(path, 'w').write(text[:a] + '\n'.join(out).strip('\n') + '\n\n' + text[b:])
    print('check_layers: module map of %s rewritten' % path)
    return 0

def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    src = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'src')
    core = os.path.join(src, 'core')
    order = re.findall(r'^#include "([\w.]+)"', open(os.path.join(core, 'locus.c.h')).read(), re.M)
    texts = {f: strip(open(os.path.join(core, f)).read()) for f in order}
    internal = open(os.path.join(core, 'internal.h')).read()
    a, b = internal.index('==== the design contract'), internal.index('==== the module map')
    hooks = set(re.findall(r'\b(design_\w+)\s*\(', strip(internal)[a:b]))
    defined = {f: definitions(texts[f]) for f in order}
    design = {}
    for d in sorted(os.listdir(src)):
        if d in ('core', 'lib') or not os.path.isdir(os.path.join(src, d)):
            continue
        for f in sorted(os.listdir(os.path.join(src, d))):
            if f.endswith('.h'):
                for name in definitions(strip(open(os.path.join(src, d, f)).read())):
                    design.setdefault(name, '%s/%s' % (d, f))
    where = {}
    for i, f in enumerate(order):
        for name in defined[f]:
            where.setdefault(name, i)
    dtexts = [strip(open(os.path.join(src, d, f)).read()) for d in sorted(os.listdir(src))
              if d not in ('core', 'lib') and os.path.isdir(os.path.join(src, d))
              for f in sorted(os.listdir(os.path.join(src, d))) if f.endswith('.h')]
    others = lambda f: [texts[g] for g in order if g != f] + dtexts
    if '--write-map' in sys.argv:
        return write_map(core, order, defined, where, others)
    if '--map' in sys.argv:
        for i, f in enumerate(order):
            used = sorted(n for n in defined[f] if where.get(n) == i and any(
                re.search(r'\b%s\s*\(' % n, t) for t in others(f)))
            print('%s: %s' % (f, ' '.join(used)))
        return 0
    bad = 0
    for i, f in enumerate(order):
        if f == 'internal.h':
            continue
        for k, line in enumerate(texts[f].split('\n'), 1):
            for name in CALL.findall(line):
                if name in hooks or name in defined[f]:
                    continue
                j = where.get(name)
                if j is not None and j > i:
                    print('src/core/%s:%d: %s() is defined in a later layer, %s' % (f, k, name, order[j]))
                    bad += 1
                elif j is None and name in design:
                    print('src/core/%s:%d: %s() is the design\'s (%s), not a hook' % (f, k, name, design[name]))
                    bad += 1
    print('check_layers: %d core files, %d hooks, %d wrong-way calls' % (len(order), len(hooks), bad))
    return 1 if bad else 0

sys.exit(main())
