"""Synthetic knowledge graphs with planted rules, for scale runs where the
right rules are known.

    python benchmarks/synthetic.py --triples 1000000 --entities 100000 \\
        --out data/synthetic-1m [--relations 50] [--seed 0]

A KG of ``--relations`` relations: most are *base* relations whose heads
and tails follow a power law over the entities (one seeded order for all,
probability proportional to 1 / (rank + 1): hubs and a long tail, as in
real KGs, the same hubs in every relation); a fifth are *planted*
relations ``h``, each implied by a chain of 1-3 base relations
``h(X,Y) <= b1(X,A), b2(A,Y)`` with a known probability (the chain's
instances are followed from sampled starts; each end pair becomes an ``h``
triple with that probability, distinct pairs up to the relation's share of
the triples), plus 10 % random ``h``
triples as noise; the last relation ``type`` plants constant rules
``type(X,c_k) <= b_k(X,A)`` (an entity with a ``b_k`` edge is of class
``c_k`` with probability 0.8).  All triples are shuffled (seeded) into
train / valid / test (90 / 5 / 5 %).  Deterministic for a seed.

Writes ``train.txt``, ``valid.txt``, ``test.txt`` (the three-file layout
``load_dataset`` reads) and ``planted.json`` (the planted rules, what
:func:`planted_recall` scores a model's rules against).
"""
import argparse
import json
import os
from typing import Dict, List, Tuple

import torch

#: The share of the triples in base relations; planted relations take the
#: rest less the type triples.
BASE_SHARE = 0.6
#: Constant-rule classes (entities of the relation `type`).
CLASSES = 5


def power_law(order: torch.Tensor, count: int,
              generator: torch.Generator) -> torch.Tensor:
    # `count` entity ids, probability 1 / (rank + 1) in `order`.
    weight = 1. / torch.arange(1, order.numel() + 1, dtype=torch.double)
    return order[torch.multinomial(weight, count, replacement=True,
                                   generator=generator)]


def _csr(src: torch.Tensor, dst: torch.Tensor, num_entities: int):
    order = torch.argsort(src, stable=True)
    ptr = torch.zeros(num_entities + 1, dtype=torch.long)
    ptr[1:] = torch.bincount(src, minlength=num_entities).cumsum(0)
    return ptr, dst[order]


def _follow(start: torch.Tensor,
            chain: List[Tuple[torch.Tensor, torch.Tensor]],
            generator: torch.Generator):
    # Random walks along the chain's relations: (start, end) of those that
    # complete it.
    node, alive = start, torch.ones_like(start, dtype=torch.bool)
    for ptr, targets in chain:
        degree = ptr[node + 1] - ptr[node]
        alive &= degree > 0
        pick = (torch.rand(node.numel(), generator=generator) *
                degree.clamp(min=1)).long()
        node = torch.where(alive, targets[(ptr[node] + pick).clamp(
            max=max(targets.numel() - 1, 0))], node)
    return start[alive], node[alive]


def _distinct_pairs(draw, count: int, num_entities: int,
                    rounds: int = 100) -> Tuple[torch.Tensor, torch.Tensor]:
    # Up to `count` distinct pairs (x, y), x != y, from draw(n) -> (x, y)
    # called until there are enough (or `rounds` draws: a chain that rarely
    # completes gives fewer).
    keys = torch.empty(0, dtype=torch.long)
    for _ in range(rounds):
        x, y = draw(max(count - keys.numel(), 1024) * 2)
        new = x[x != y] * num_entities + y[x != y]
        # Distinct, in the order drawn (a seeded subsample, not the sorted
        # smallest ids).
        merged = torch.cat([keys, new])
        unique, inverse = torch.unique(merged, return_inverse=True)
        first = torch.full((unique.numel(), ), merged.numel())
        first.scatter_reduce_(0, inverse, torch.arange(merged.numel()),
                              'amin')
        keys = merged[torch.sort(first).values]
        if keys.numel() >= count:
            break
    keys = keys[:count]
    return keys // num_entities, keys % num_entities


def generate(num_triples: int, num_entities: int, num_relations: int = 50,
             seed: int = 0) -> Tuple[Dict[str, torch.Tensor], List[dict]]:
    r"""The triples of each split (:obj:`[3, n]`, head, relation, tail) and
    the planted rules (:obj:`{"head", "body", "probability"}` with relation
    ids, or a constant rule :obj:`{"head", "body", "answer", "constant":
    true}`)."""
    if num_relations < 7:
        raise ValueError('at least 7 relations (base, planted and type)')
    gen = torch.Generator().manual_seed(seed)
    type_relation = num_relations - 1
    num_planted = max(1, num_relations // 5)
    base = list(range(num_relations - 1 - num_planted))
    planted_heads = list(range(len(base), type_relation))
    per_base = int(BASE_SHARE * num_triples / len(base))
    parts, csr = [], {}
    # One popularity order for every relation and both ends: the hubs of
    # one relation are those of the others, so chains of relations meet.
    order = torch.randperm(num_entities, generator=gen)
    for b in base:
        src, dst = _distinct_pairs(
            lambda n: (power_law(order, n, gen), power_law(order, n, gen)),
            per_base, num_entities)
        parts.append(torch.stack([src, torch.full_like(src, b), dst]))
        csr[b] = _csr(src, dst, num_entities)
    planted: List[dict] = []
    per_planted = int((1 - BASE_SHARE - 0.05) * num_triples / num_planted)
    for i, h in enumerate(planted_heads):
        length = 1 + i % 3
        body = torch.randperm(len(base), generator=gen)[:length].tolist()
        probability = 0.5 + 0.4 * float(torch.rand(1, generator=gen))
        # Starts: entities with an edge of the body's first relation; the
        # chain's end pairs, each kept with the probability.
        ptr = csr[body[0]][0]
        has = (ptr[1:] > ptr[:-1]).nonzero().view(-1)

        def chain_pairs(n):
            x, y = _follow(has[torch.randint(has.numel(), (n, ),
                                             generator=gen)],
                           [csr[b] for b in body], gen)
            keep = torch.rand(x.numel(), generator=gen) < probability
            return x[keep], y[keep]

        target = int(per_planted / 1.1)
        x, y = _distinct_pairs(chain_pairs, target, num_entities)
        noise = int(0.1 * x.numel())
        x = torch.cat([x, torch.randint(num_entities, (noise, ),
                                        generator=gen)])
        y = torch.cat([y, torch.randint(num_entities, (noise, ),
                                        generator=gen)])
        parts.append(torch.stack([x, torch.full_like(x, h), y]))
        planted.append({'head': h, 'body': body,
                        'probability': round(probability, 4)})
    # Constant rules: type(X, c_k) <= b_k(X, A).
    classes = torch.randperm(num_entities, generator=gen)[:CLASSES]
    for k in range(CLASSES):
        b = base[k % len(base)]
        ptr = csr[b][0]
        x = (ptr[1:] > ptr[:-1]).nonzero().view(-1)
        x = x[(torch.rand(x.numel(), generator=gen) < 0.8) &
              (x != classes[k])]
        parts.append(torch.stack([x, torch.full_like(x, type_relation),
                                  torch.full_like(x, int(classes[k]))]))
        planted.append({'head': type_relation, 'body': [b],
                        'answer': int(classes[k]), 'constant': True})
    triples = torch.unique(torch.cat(parts, dim=1), dim=1)
    triples = triples[:, torch.randperm(triples.size(1), generator=gen)]
    cut = [int(0.9 * triples.size(1)), int(0.95 * triples.size(1))]
    return {'train': triples[:, :cut[0]], 'valid': triples[:, cut[0]:cut[1]],
            'test': triples[:, cut[1]:]}, planted


def write(folder: str, splits: Dict[str, torch.Tensor], planted: List[dict],
          num_relations: int):
    r"""The three triple files (names :obj:`e<id>`, :obj:`r<id>`, the last
    relation :obj:`type`) and :obj:`planted.json`."""
    os.makedirs(folder, exist_ok=True)
    names = [f'r{r}' for r in range(num_relations - 1)] + ['type']
    for split, triples in splits.items():
        with open(os.path.join(folder, f'{split}.txt'), 'w') as f:
            for h, r, t in triples.t().tolist():
                f.write(f'e{h}\t{names[r]}\te{t}\n')
    with open(os.path.join(folder, 'planted.json'), 'w') as f:
        json.dump([{**rule, 'head': names[rule['head']],
                    'body': [names[b] for b in rule['body']],
                    **({'answer': f"e{rule['answer']}"}
                       if 'answer' in rule else {})} for rule in planted],
                  f, indent=1)


def planted_recall(applied, data, planted: List[dict], k: int = 10) -> float:
    r"""The share of the planted rules (as :obj:`planted.json` names them)
    among the :obj:`k` best rules of their head relation in
    :obj:`applied` (:class:`~pyg_degreembed.AppliedRules` mined on
    :obj:`data`)."""
    relation = {name: i for i, name in enumerate(data.relation_names)}
    entity = {name: i for i, name in enumerate(data.entity_names)}
    found = 0
    for rule in planted:
        head = relation[rule['head']]
        body = tuple(relation[b] for b in rule['body'])
        if rule.get('constant'):
            answer = entity.get(rule['answer'])
            top = applied.constant_rules_of(head)[:k]
            found += any(r.body_type == body[0] and r.body_node < 0 and
                         r.answer == answer for r in top)
        else:
            top = applied.rules(head)[:k]
            found += any(tuple(r.body) == body for r in top)
    return found / len(planted)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--triples', type=int, required=True)
    parser.add_argument('--entities', type=int, required=True)
    parser.add_argument('--relations', type=int, default=50)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--out', required=True)
    args = parser.parse_args()
    splits, planted = generate(args.triples, args.entities, args.relations,
                               args.seed)
    write(args.out, splits, planted, args.relations)
    print(f"{args.out}: {sum(t.size(1) for t in splits.values())} triples, "
          f'{len(planted)} planted rules')


if __name__ == '__main__':
    main()
