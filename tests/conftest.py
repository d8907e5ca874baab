import itertools
import os

import pytest
import torch

from pyg_degreembed import TypedGraph, from_edge_index
from pyg_degreembed.data.kg import inverse_relation

#: The device of the numerical tests (models, propagation, training,
#: evaluation, explanations): the environment variable
#: PYG_DEGREEMBED_TEST_DEVICE, e.g. ``cuda``; the CPU by default (CI).
TEST_DEVICE = os.environ.get('PYG_DEGREEMBED_TEST_DEVICE', 'cpu')


@pytest.fixture
def device():
    device = torch.device(TEST_DEVICE)
    if device.type == 'cuda' and not torch.cuda.is_available():
        pytest.fail(f'PYG_DEGREEMBED_TEST_DEVICE={TEST_DEVICE}, but CUDA is '
                    'not available')
    return device


def dense_operators(edge_index, edge_type, num_nodes, num_edge_types):
    r"""Explicit adjacency matrices M_k[i, j] = number of edges i -k-> j."""
    M = torch.zeros(num_edge_types, num_nodes, num_nodes, dtype=torch.double)
    M.index_put_((edge_type, edge_index[0], edge_index[1]),
                 torch.ones(edge_type.numel(), dtype=torch.double),
                 accumulate=True)
    return M


@pytest.fixture
def toy_kg():
    r"""A hand-built family KG: 6 people, relations 0 = parentOf,
    1 = siblingOf, 2 = spouseOf; entity 5 has no edges at all."""
    triples = torch.tensor([
        [0, 0, 2], [0, 0, 3], [1, 0, 2], [1, 0, 3],  # 0, 1 parents of 2, 3
        [2, 1, 3], [3, 1, 2],  # 2, 3 siblings
        [0, 2, 1], [1, 2, 0],  # 0, 1 spouses
        [3, 0, 4],  # 3 parent of 4
    ]).t()
    valid = torch.tensor([[2, 0, 4]]).t()
    test = torch.tensor([[4, 1, 4]]).t()
    return from_edge_index(triples[[0, 2]], triples[1], num_nodes=6,
                           num_relations=3,
                           splits={'valid': valid, 'test': test})


@pytest.fixture
def random_graph():
    r"""A random multigraph with duplicate edges and self-loops, with
    inverse edges, 4 relations (8 edge types), 12 nodes."""
    gen = torch.Generator().manual_seed(0)
    N, R, E = 12, 4, 40
    src = torch.randint(0, N, (E, ), generator=gen)
    dst = torch.randint(0, N, (E, ), generator=gen)
    typ = torch.randint(0, R, (E, ), generator=gen)
    # Duplicates and a self-loop on purpose:
    src = torch.cat([src, src[:5], torch.tensor([3])])
    dst = torch.cat([dst, dst[:5], torch.tensor([3])])
    typ = torch.cat([typ, typ[:5], torch.tensor([1])])
    edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    edge_type = torch.cat([typ, typ + R])
    return edge_index, edge_type, N, 2 * R


@pytest.fixture
def random_typed_graph(random_graph):
    return TypedGraph(*random_graph)


def chain_kg():
    r"""A KG where relation 2 is exactly relation 0 followed by relation 1,
    so the rule r2(X,Y) <= r0(X,Z), r1(Z,Y) answers every query."""
    gen = torch.Generator().manual_seed(0)
    N = 60
    a = torch.randperm(N, generator=gen)
    b = torch.randperm(N, generator=gen)
    c = torch.arange(N)
    r0 = torch.stack([c, torch.zeros(N, dtype=torch.long), a[c]])
    r1 = torch.stack([a[c], torch.ones(N, dtype=torch.long), b[c]])
    r2 = torch.stack([c, torch.full((N, ), 2), b[c]])
    facts = torch.cat([r0, r1], dim=1)
    train, valid, test = r2[:, :40], r2[:, 40:50], r2[:, 50:]
    return from_edge_index(train[[0, 2]], train[1], num_nodes=N,
                           num_relations=3, splits={
                               'facts': facts,
                               'valid': valid,
                               'test': test
                           })


@torch.no_grad()
def reference_scores(model, edge_index, edge_type, N, head, relation,
                     remove_tail=None):
    r"""Explicit re-computation with dense operators B_k = diag(rho) M_k,
    each query on a graph rebuilt without its left-out edges (rho, i.e. the
    degree sets, included)."""
    K, R = model.num_edge_types, model.num_relations
    attention = model.operator_attention(relation).double()
    out = []
    for b in range(head.numel()):
        keep = torch.ones(edge_type.numel(), dtype=torch.bool)
        if remove_tail is not None:
            h, q, t = int(head[b]), int(relation[b]), int(remove_tail[b])
            q_inv = int(inverse_relation(torch.tensor(q), R))
            for s, k, d in ((h, q, t), (t, q_inv, h)):
                keep &= ~((edge_index[0] == s) & (edge_type == k) &
                          (edge_index[1] == d))
        rho = model.source_weights(TypedGraph(edge_index[:, keep],
                                              edge_type[keep], N, K))
        if rho is not None:
            rho = rho.to_dense()
        B = dense_operators(edge_index[:, keep], edge_type[keep], N, K)
        if rho is not None:
            B = B * rho.double().t().unsqueeze(-1)  # scale row e by rho[e, k]
        score = torch.zeros(N, dtype=torch.double)
        for j in range(model.rank):
            x = torch.zeros(N, dtype=torch.double)
            x[head[b]] = 1.
            for step in range(model.num_steps):
                a = attention[b, j, step]
                x = torch.einsum('k,i,kij->j', a[:K], x, B) + a[K] * x
                x = x / x.sum().clamp(min=model.eps)
            score += x
        out.append(score)
    return torch.stack(out)


def known_queries(data):
    r"""The rules' evidence, written out: the queries (x, q, y), x != y, of
    both directions of every facts and train triple, as a set."""
    R = data.num_relations
    out = set()
    for split in ('facts', 'train'):
        for (h, t), r in zip(data[f'{split}_edge_index'].t().tolist(),
                             data[f'{split}_edge_type'].tolist()):
            if h != t:
                out |= {(h, r, t), (t, r + R, h)}
    return out


def attention_rule_masses(attention):
    r"""Confidence of every rule by enumerating all (K+1)^L operator paths
    of the attention [T, L, K + 1] (identity paddings merged)."""
    T, L, K1 = attention.shape
    out = {}
    for path in itertools.product(range(K1), repeat=L):
        body = tuple(o for o in path if o != K1 - 1)
        if body:
            out[body] = out.get(body, 0.) + float(sum(
                torch.prod(attention[j, torch.arange(L), torch.tensor(path)])
                for j in range(T)))
    return out


def brute_force_attention_rules(model, relation, k):
    r"""The top-k rules of a query relation by attention confidence,
    relative to the best (the reference for extract_rules)."""
    with torch.no_grad():
        attention = model.operator_attention(torch.tensor([relation]))[0]
    masses = attention_rule_masses(attention)
    best = max(masses.values())
    ranked = sorted(masses.items(), key=lambda item: (-item[1], item[0]))
    return [(body, value / best) for body, value in ranked[:k]]


def assert_picture(path, min_pixels=200):
    r"""The file is a PNG picture of at least min_pixels x min_pixels with
    something drawn on it (not one flat colour)."""
    import matplotlib.image
    assert open(path, 'rb').read(8) == b'\x89PNG\r\n\x1a\n'
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and min(image.shape[:2]) >= min_pixels
    rgb = image[..., :3].reshape(-1, 3)
    drawn = (rgb != rgb[0]).any(axis=1).mean()  # differs from the corner
    assert drawn > 0.01, f'{path}: {100 * drawn:.2f} % of the pixels drawn'
    return image


def triples_file(path, n=60, extra=''):
    r"""Writes a small triples file of 40 entities and 3 relations."""
    lines = [f'e{i}\tr{i % 3}\te{(i * 7 + 1) % 40}' for i in range(n)]
    path.write_text('\n'.join(lines) + '\n' + extra)
    return str(path)


def trained_toy(folder):
    r"""Trains a tiny model on :func:`triples_file` with the command line;
    returns the triples file and the checkpoint."""
    from pyg_degreembed.cli import main
    kg = triples_file(folder / 'kg.tsv')
    checkpoint = str(folder / 'run.pt')
    assert main(['train', '--dataset', kg, '--dim', '4', '--epochs', '1',
                 '--checkpoint', checkpoint, '--no-progress']) == 0
    return kg, checkpoint


def one_line_error(capsys, argv, message, code=2):
    r"""Runs the command line, which must fail with status :obj:`code` and
    one line :obj:`error: ...` holding :obj:`message`."""
    from pyg_degreembed.cli import main
    got = main(argv)
    err = capsys.readouterr().err
    assert got == code, err
    assert err.startswith('error: ') and len(err.strip().splitlines()) == 1
    assert message in err, err
    return err


def brute_force_ranks(model, kg, typed: bool = False):
    r"""Filtered ranks (realistic ties) of the test triples, both
    directions, by scoring each query and counting by hand; with
    :obj:`typed`, among the entities of the answer's node type."""
    from pyg_degreembed.data.kg import all_triples, split_triples
    R = kg.num_relations
    known = {tuple(t) for t in all_triples(kg).t().tolist()}
    node_type = kg.node_type.tolist() if typed else None
    types = kg.relation_types.tolist() if typed else None
    out = []
    for direction in (0, 1):
        for h, r, t in split_triples(kg, 'test').t().tolist():
            head, answer, q = (h, t, r) if direction == 0 else (t, h, r + R)
            scores = model(kg, [head], [q])[0].tolist()
            kind = types[r][1 - direction] if typed else None
            better = tied = 0
            for e in range(kg.num_nodes):
                triple = (head, r, e) if direction == 0 else (e, r, head)
                if e == answer or triple in known or \
                        typed and node_type[e] != kind:
                    continue
                better += scores[e] > scores[answer]
                tied += scores[e] == scores[answer]
            out.append(1 + better + tied / 2)
    return torch.tensor(out, dtype=torch.double)
