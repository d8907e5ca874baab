r"""Plots (need the :obj:`plot` extra: :obj:`matplotlib`,
:obj:`scikit-learn`)."""
from typing import Any, Optional, Sequence

import torch
from torch.nn import Module


@torch.no_grad()
def plot_entity_embedding(model: Module, graph: Any, path: str,
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

    from .nn import DegreeEmbedding
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
