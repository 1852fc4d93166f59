"""networkx views of a trace's step DAG, and graph algorithms on it.

Nodes are op ids with the op's fields as attributes; an edge ``a -> b`` means ``b`` depends on
``a``. Used for validation on load and for critical paths and transmission orders in the simulator.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx

from simcore.trace.model import Trace


def step_graph(trace: Trace) -> nx.DiGraph:
    """The step DAG of ``trace`` as a ``networkx.DiGraph``.

    Node attributes: ``resource``, ``kind``, ``layer``, ``nbytes`` and ``index`` (position in
    ``trace.ops``). Edges go from a dependency to the op that waits for it.
    """
    graph = nx.DiGraph(model=trace.metadata.model_name)
    for i, op in enumerate(trace.ops):
        graph.add_node(
            op.id, resource=op.resource, kind=op.kind, layer=op.layer, nbytes=op.nbytes, index=i
        )
    graph.add_edges_from((dep, op.id) for op in trace.ops for dep in op.deps)
    return graph


def longest_path_to_end(trace: Trace, cost_s: Sequence[float]) -> dict[str, float]:
    """For each op, the longest path (sum of ``cost_s``) from its start to the end of the step.

    ``cost_s[i]`` is the cost of ``trace.ops[i]``. This is the critical-path priority that
    TicTac-like transmission orders use: ops with a larger value should go first.
    """
    graph = step_graph(trace)
    remaining: dict[str, float] = {}
    for node in reversed(list(nx.topological_sort(graph))):
        tail = max((remaining[s] for s in graph.successors(node)), default=0.0)
        remaining[node] = cost_s[graph.nodes[node]["index"]] + tail
    return remaining


def critical_path(trace: Trace, cost_s: Sequence[float]) -> tuple[list[str], float]:
    """The ops of a longest path through the DAG under ``cost_s``, and its length in seconds."""
    remaining = longest_path_to_end(trace, cost_s)
    graph = step_graph(trace)
    sources = [n for n in graph.nodes if graph.in_degree(n) == 0]
    node = max(sources, key=lambda n: remaining[n])
    path = [node]
    while graph.out_degree(node):
        node = max(graph.successors(node), key=lambda n: remaining[n])
        path.append(node)
    return path, remaining[path[0]]
