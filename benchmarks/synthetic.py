"""Synthetic knowledge graphs with planted rules, for scale runs where the
right rules are known.

    python benchmarks/synthetic.py --triples 1000000 --entities 100000 \\
        --out data/synthetic-1m [--relations 50] [--seed 0]

A KG of ``--relations`` relations of three kinds:

* *planted* relations ``h`` (a fifth), each implied by its own chain of 1-3
  *body* relations ``h(X,Y) <= b1(X,A), b2(A,Y)`` with a stated
  probability p: every distinct pair (x, y), x != y, that the body joins
  is an ``h`` triple with probability p, so the rule's confidence in the
  generated KG is p up to binomial noise (measured exactly by the tests),
  plus 10 % random ``h`` triples as noise.  A body relation links the
  entities of its rule's *community* (a seeded subset), each with
  ``BODY_DEGREE`` edges to random members, the community sized so that the
  body joins about as many pairs as the head should have triples;
* *base* relations (the rest, less one) whose heads and tails follow a
  power law over the entities (one seeded order for all, probability
  proportional to 1 / (rank + 1): hubs and a long tail, as in real KGs,
  the same hubs in every relation): the noise a miner has to search
  through;
* ``type``, whose constant rules ``type(X,c_k) <= b_k(X,A)`` (an entity with
  a ``b_k`` edge, b_k a base relation, is of class ``c_k`` with probability
  0.8) are planted too.

All triples are shuffled (seeded) into train / valid / test (90 / 5 / 5 %;
``--max-eval`` caps valid and test, the rest going to train).
Deterministic for a seed.

Writes ``train.txt``, ``valid.txt``, ``test.txt`` (the three-file layout
``load_dataset`` reads) and ``planted.json`` (the planted rules, what
:func:`planted_recall` scores a model's rules against).
"""
import argparse
import json
import os
from typing import Dict, List, Optional, Tuple

import torch

from pyg_degreembed.data.ragged import ragged_arange

#: The share of the triples in base relations, and in planted relations
#: (their bodies and the type triples come on top).
BASE_SHARE = 0.6
PLANTED_SHARE = 0.2
#: Edges of a body relation per member of its community.
BODY_DEGREE = 3
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


def body_pairs(edges: List[torch.Tensor],
               num_entities: int) -> torch.Tensor:
    r"""The distinct pairs :math:`x \neq y` that a chain of relations joins
    (each relation's edges :obj:`[2, m]`, in the chain's order), as keys
    :math:`x N + y`, sorted."""
    key = torch.unique(edges[0][0] * num_entities + edges[0][1])
    for src, dst in edges[1:]:
        x, node = key // num_entities, key % num_entities
        ptr, targets = _csr(src, dst, num_entities)
        row, at = ragged_arange(ptr[node], ptr[node + 1] - ptr[node])
        key = torch.unique(x[row] * num_entities + targets[at])
    return key[key // num_entities != key % num_entities]


def _distinct_pairs(draw, count: int, num_entities: int,
                    rounds: int = 100) -> Tuple[torch.Tensor, torch.Tensor]:
    # Up to `count` distinct pairs (x, y), x != y, from draw(n) -> (x, y)
    # called until there are enough (or `rounds` draws).
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


def _community_edges(members: torch.Tensor,
                     generator: torch.Generator) -> torch.Tensor:
    # A body relation: BODY_DEGREE edges from each member of a community to
    # random members.
    src = members.repeat_interleave(BODY_DEGREE)
    dst = members[torch.randint(members.numel(), (src.numel(), ),
                                generator=generator)]
    return torch.stack([src, dst])


def generate(num_triples: int, num_entities: int, num_relations: int = 50,
             seed: int = 0, max_eval: Optional[int] = None
             ) -> Tuple[Dict[str, torch.Tensor], List[dict]]:
    r"""The triples of each split (:obj:`[3, n]`, head, relation, tail) and
    the planted rules (:obj:`{"head", "body", "probability"}` with relation
    ids, or a constant rule :obj:`{"head", "body", "answer", "constant":
    true}`); valid and test hold 5 % of the triples each, at most
    :obj:`max_eval` (the rest is train)."""
    num_planted = max(1, num_relations // 5)
    lengths = [1 + i % 3 for i in range(num_planted)]
    num_base = num_relations - 1 - num_planted - sum(lengths)
    if num_base < 4:
        raise ValueError('at least 7 relations (base, body, planted and '
                         'type)')
    gen = torch.Generator().manual_seed(seed)
    type_relation = num_relations - 1
    base = list(range(num_base))
    parts = []
    # One popularity order for every base relation and both ends: the hubs
    # of one relation are those of the others.
    order = torch.randperm(num_entities, generator=gen)
    for b in base:
        src, dst = _distinct_pairs(
            lambda n: (power_law(order, n, gen), power_law(order, n, gen)),
            int(BASE_SHARE * num_triples / num_base), num_entities)
        parts.append(torch.stack([src, torch.full_like(src, b), dst]))
    planted: List[dict] = []
    per_planted = int(PLANTED_SHARE * num_triples / num_planted)
    body_relation = num_base
    for i, length in enumerate(lengths):
        h = num_base + sum(lengths) + i
        probability = 0.5 + 0.4 * float(torch.rand(1, generator=gen))
        # The body joins about per_planted / (1.1 p) pairs: a community of
        # that many members / BODY_DEGREE^(length - 1).
        pairs = per_planted / 1.1 / probability
        size = min(num_entities, max(
            2 * BODY_DEGREE, round(pairs / BODY_DEGREE**length)))
        body = list(range(body_relation, body_relation + length))
        body_relation += length
        members = torch.randperm(num_entities, generator=gen)[:size]
        edges = [_community_edges(members, gen) for _ in body]
        for b, (src, dst) in zip(body, edges):
            parts.append(torch.stack([src, torch.full_like(src, b), dst]))
        key = body_pairs(edges, num_entities)
        key = key[torch.rand(key.numel(), generator=gen) < probability]
        noise = torch.randint(num_entities, (2, int(0.1 * key.numel())),
                              generator=gen)
        x = torch.cat([key // num_entities, noise[0]])
        y = torch.cat([key % num_entities, noise[1]])
        parts.append(torch.stack([x, torch.full_like(x, h), y]))
        planted.append({'head': h, 'body': body,
                        'probability': round(probability, 4)})
    # Constant rules: type(X, c_k) <= b_k(X, A).
    classes = torch.randperm(num_entities, generator=gen)[:CLASSES]
    for k in range(CLASSES):
        b = base[k % len(base)]
        x = torch.unique(parts[b][0])
        x = x[(torch.rand(x.numel(), generator=gen) < 0.8) &
              (x != classes[k])]
        parts.append(torch.stack([x, torch.full_like(x, type_relation),
                                  torch.full_like(x, int(classes[k]))]))
        planted.append({'head': type_relation, 'body': [b],
                        'answer': int(classes[k]), 'constant': True})
    triples = torch.unique(torch.cat(parts, dim=1), dim=1)
    triples = triples[:, torch.randperm(triples.size(1), generator=gen)]
    held = int(0.05 * triples.size(1))
    if max_eval is not None:
        held = min(held, max_eval)
    cut = [triples.size(1) - 2 * held, triples.size(1) - held]
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
    parser.add_argument('--max-eval', type=int, default=None,
                        help='at most this many valid and test triples each')
    parser.add_argument('--out', required=True)
    args = parser.parse_args()
    splits, planted = generate(args.triples, args.entities, args.relations,
                               args.seed, args.max_eval)
    write(args.out, splits, planted, args.relations)
    print(f"{args.out}: {sum(t.size(1) for t in splits.values())} triples, "
          f'{len(planted)} planted rules')


if __name__ == '__main__':
    main()
