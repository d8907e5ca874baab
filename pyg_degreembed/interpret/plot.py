r"""Plots (need the :obj:`plot` extra: :obj:`matplotlib`,
:obj:`scikit-learn`)."""
from collections import Counter
from typing import Any, List, Optional, Sequence, Tuple

import torch

from pyg_degreembed.nn.rule_reasoner import RuleReasoner


@torch.no_grad()
def plot_entity_embedding(model: RuleReasoner, graph: Any, path: str,
                          top: int = 10, seed: int = 0,
                          relation_names: Optional[Sequence[str]] = None):
    r"""A t-SNE plot of the learned entity embeddings :math:`\mathbf{H}_e` of
    a :class:`~pyg_degreembed.DegreEmbedReasoner`, on symmetric-log axes as
    in the paper's Fig. 5.  Saved as PNG.

    :math:`\mathbf{H}_e` depends only on the degree-type set of :math:`e`
    (its "class"), so all entities of a class share one point: the plot
    shows one point per distinct set, sized by the number of its entities,
    with the :obj:`top` most populated classes coloured and the rest grey.

    Args:
        model (RuleReasoner): A trained model with a
            :class:`~pyg_degreembed.DegreeEmbedding` as its edge weight.
        graph: The graph, as :meth:`~pyg_degreembed.RuleReasoner.forward`
            takes it.
        path (str): The PNG file to write.
        top (int, optional): How many classes to colour.
            (default: :obj:`10`)
        seed (int, optional): Seed of t-SNE. (default: :obj:`0`)
        relation_names (Sequence[str], optional): Names for the legend.

    :rtype: the :obj:`[U, 2]` t-SNE coordinates of the :math:`U` distinct
        sets and the number of entities of each.
    """
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from sklearn.manifold import TSNE

    from pyg_degreembed.nn import DegreeEmbedding
    if not isinstance(model.edge_weight, DegreeEmbedding):
        raise ValueError(f'{model} has no degree embedding to plot')
    degree = model.graph(graph).degree
    counts = torch.bincount(degree.index,
                            minlength=degree.tokens.size(0)).cpu()
    x = model.edge_weight.embed_sets(degree).cpu().double().numpy()
    perplexity = min(30., max(2., (x.shape[0] - 1) / 3))
    xy = TSNE(n_components=2, perplexity=perplexity, init='pca',
              random_state=seed).fit_transform(x)

    fig, ax = plt.subplots(figsize=(7, 6))
    classes = torch.argsort(counts, descending=True, stable=True)
    rest = classes[top:].numpy()
    size = 4 + 40 * (counts.double() / counts.max()).numpy()
    ax.scatter(xy[rest, 0], xy[rest, 1], s=size[rest], color='0.8',
               label=f'other classes ({len(rest)})')
    K = model.num_edge_types
    for i, c in enumerate(classes[:top].tolist()):
        types = degree.tokens[c, :degree.lengths[c]].tolist()
        if relation_names is not None:
            R = len(relation_names)
            text = ', '.join(relation_names[k] if k < R else
                             f'inv_{relation_names[k - R]}' if k < K else
                             '(no edges)' for k in types)
        else:
            text = ', '.join(map(str, types))
        if len(text) > 45:
            text = text[:42] + '...'
        ax.scatter(xy[c, 0], xy[c, 1], s=size[c], color=plt.cm.tab10(i),
                   label=f'{text} ({int(counts[c])})')
    ax.set_xscale('symlog')
    ax.set_yscale('symlog')
    ax.set_title('t-SNE of the learned degree embeddings')
    ax.legend(fontsize=6, markerscale=1, loc='best')
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return xy, counts


def parallel_arcs(pairs: List[Tuple[int, int]]) -> List[str]:
    r"""The connection styles of networkx's drawing of a multigraph's
    edges :obj:`pairs` (its i-th edge of a pair takes the i-th style):
    parallel edges ('sister' and 'inv_sister' between the same two people)
    each on an arc of its own, so that no label hides another."""
    parallel = max(Counter(pairs).values(), default=1)
    return [f'arc3,rad={0.12 + 0.25 * i:.2f}' for i in range(parallel)]


def plot_explanation(explanation, path: str,
                     entity_names: Optional[Sequence[str]] = None,
                     relation_names: Optional[Sequence[str]] = None,
                     max_paths: int = 12):
    r"""Draws an :class:`~pyg_degreembed.interpret.explain.Explanation` as a
    graph and
    saves it as PNG: the head on the left (green), the candidate on the
    right (red), the entities between them by the step at which the paths
    reach them; an edge's width and label give its relation and its share
    of the score.  Only the :obj:`max_paths` largest paths are drawn (the
    title says how many there are).

    :rtype: the :class:`networkx.MultiDiGraph` that was drawn.
    """
    import matplotlib
    matplotlib.use('Agg')
    from dataclasses import replace

    import matplotlib.pyplot as plt
    import networkx as nx

    shown = replace(explanation, paths=explanation.paths[:max_paths])
    graph = shown.to_networkx(entity_names, relation_names)
    # Columns: head 0, tail last, others by their first position on a path.
    depth = {explanation.head: 0}
    longest = max((len(p.body) for p in shown.paths), default=1)
    for p in shown.paths:
        for i, e in enumerate(p.entities[1:-1], start=1):
            depth.setdefault(e, i)
    depth.setdefault(explanation.tail, max(longest, 1))
    if explanation.tail != explanation.head:
        depth[explanation.tail] = max(longest, 1)
    for node in graph.nodes:
        graph.nodes[node]['layer'] = depth.get(node, 1)
    position = nx.multipartite_layout(graph, subset_key='layer')

    fig, ax = plt.subplots(figsize=(8, 4.5))
    colors = ['tab:green' if graph.nodes[n]['role'] == 'head' else
              'tab:red' if graph.nodes[n]['role'] == 'tail' else
              'lightgray' for n in graph.nodes]
    nx.draw_networkx_nodes(graph, position, node_color=colors,
                           node_size=900, ax=ax)
    nx.draw_networkx_labels(graph, position, font_size=8, ax=ax, labels={
        n: graph.nodes[n]['name'] for n in graph.nodes})
    edges = list(graph.edges(keys=True, data=True))
    top = max((d['share'] for *_, d in edges), default=1.) or 1.
    style = parallel_arcs([(u, v) for u, v, _, _ in edges])
    nx.draw_networkx_edges(
        graph, position, edgelist=[(u, v, k) for u, v, k, _ in edges],
        width=[0.5 + 5 * d['share'] / top for *_, d in edges],
        connectionstyle=style, node_size=900, arrowsize=14, ax=ax)
    nx.draw_networkx_edge_labels(
        graph, position, connectionstyle=style, font_size=7, ax=ax,
        edge_labels={(u, v, k): f"{d['name']} {d['share']:.2f}"
                     for u, v, k, d in edges})
    name = (entity_names[explanation.tail] if entity_names is not None
            else str(explanation.tail))
    ax.set_title(f'why {name}? score {explanation.score:.4g}, '
                 f'{len(shown.paths)} of {len(explanation.paths)} paths '
                 '(edge label: relation, share of the score)', fontsize=9)
    ax.axis('off')
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return graph
