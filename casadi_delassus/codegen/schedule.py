"""Emission order of CasADi's straight-line code, for fewer register spills.

CasADi prints an SX function in the order its algorithm traced it; a value computed early and
needed much later stays live across long stretches, and with more values live than registers
gcc stores and reloads them (about half of the x86 instructions of a single call were stack
accesses).  ``reorder`` renames every assignment to its own variable (SSA) and lists the
statements again greedily: among the statements whose operands are all computed, the one that
ends the most live ranges (operands it is the last user of) minus the one it starts comes
first, ties in CasADi's order; constants and input reads are printed just before their first
user.  That lowered the mean number of live values (go1 4F3 pv_osim: 121 -> 98) and the single
call's time by 3-7 % (go1 4F3, talos 2F, g1 2F; a depth-first order from the outputs gained
about half as much).  The operations and their operands are unchanged: with the same
contraction of multiply-adds the results are the same bits (tests/codegen/test_sincos.py).

The rewrite recognises CasADi's statements exactly (codegen/statements.py) and raises
CompilerError on any other line.
"""
from __future__ import annotations

import heapq
import re

from .statements import ASSIGN, DECL, INPUT, OUTPUT, fail, function_body

_NAME = re.compile(r"\ba\d+\b")


def _parse(body, first):
    """(assignments [(new name, text with new names, operands)], outputs [(line, operands)]):
    every assignment gets the name a<k>, k its index."""
    current, nodes, outputs = {}, [], []

    def rename(text, lineno, line):
        def sub(m):
            if m[0] not in current:
                fail(lineno, line, f"reads {m[0]} before it is set", "reorder")
            return current[m[0]]
        return _NAME.sub(sub, text)

    for lineno, line in enumerate(body, first + 1):
        if not line.strip() or DECL.fullmatch(line) or line == "  return 0;":
            continue
        if m := OUTPUT.fullmatch(line):
            text = rename(m[3], lineno, line)
            outputs.append((f"  if (res[{m[1]}]!=0) res[{m[1]}][{m[2]}]={text};", list(dict.fromkeys(_NAME.findall(text)))))
        elif m := INPUT.fullmatch(line):
            current[m[1]] = name = f"a{len(nodes)}"
            nodes.append((name, f"arg[{m[2]}]? arg[{m[2]}][{m[3]}] : 0", []))
        elif m := ASSIGN.fullmatch(line):
            text = rename(m[2], lineno, line)
            current[m[1]] = name = f"a{len(nodes)}"
            nodes.append((name, text, list(dict.fromkeys(_NAME.findall(text)))))
        else:
            fail(lineno, line, "unknown statement", "reorder")
    return nodes, outputs


def _greedy(nodes, outputs):
    """The order of the statements (node indices, then len(nodes) + k for output k)."""
    n = len(nodes)
    index = {name: k for k, (name, _, _) in enumerate(nodes)}
    operands = [[index[o] for o in ops] for _, _, ops in nodes] + [[index[o] for o in ops] for _, ops in outputs]
    users = [[] for _ in range(n)]
    for item, ops in enumerate(operands):
        for o in ops:
            users[o].append(item)
    lazy = [not ops for _, _, ops in nodes]                  # constants and input reads
    left = [len(u) for u in users]                           # users not yet printed
    waiting = [sum(not lazy[o] for o in ops) for ops in operands]

    def gain(item):
        return sum(1 for o in operands[item] if not lazy[o] and left[o] == 1) - (item < n)

    heap = [(-gain(i), i) for i in range(len(operands)) if not waiting[i] and not (i < n and lazy[i])]
    heapq.heapify(heap)
    order, printed = [], [False] * len(operands)
    while heap:
        g, item = heapq.heappop(heap)
        if printed[item]:
            continue
        if -g != gain(item):                                 # stale: its operands' last uses changed
            heapq.heappush(heap, (-gain(item), item))
            continue
        for o in operands[item]:
            if lazy[o] and not printed[o]:
                printed[o] = True
                order.append(o)
        printed[item] = True
        order.append(item)
        for o in operands[item]:
            left[o] -= 1
            if left[o] == 1:                                 # its last user now ends it: gains one
                for u in users[o]:
                    if not printed[u] and not waiting[u]:
                        heapq.heappush(heap, (-gain(u), u))
        for u in users[item] if item < n else ():
            waiting[u] -= 1
            if not waiting[u]:
                heapq.heappush(heap, (-gain(u), u))
    return order


def reorder(casadi_code):
    """CasADi's code with its function body in the greedy order of the module docstring
    (a constant no statement reads is dropped)."""
    first, body = function_body(casadi_code)
    nodes, outputs = _parse(body, first)
    out, names = [], []
    for item in _greedy(nodes, outputs):
        if item >= len(nodes):
            out.append(outputs[item - len(nodes)][0])
        else:
            name, text, _ = nodes[item]
            names.append(name)
            out.append(f"  {name}={text};")
    decls = [f"  casadi_real {', '.join(names[i:i + 12])};" for i in range(0, len(names), 12)]
    lines = casadi_code.splitlines()
    return "\n".join([*lines[:first], *decls, *out, "  return 0;", *lines[first + len(body):]]) + "\n"
