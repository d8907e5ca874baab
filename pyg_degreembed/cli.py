r"""The :obj:`pyg-degreembed` command line.

.. code-block:: bash

    pyg-degreembed train --dataset family --checkpoint runs/family.pt
    pyg-degreembed evaluate --checkpoint runs/family.pt
    pyg-degreembed predict --checkpoint runs/family.pt --head 1 \
        --relation brother
    pyg-degreembed rules --checkpoint runs/family.pt --relation aunt
    pyg-degreembed explain --checkpoint runs/family.pt --head 1 \
        --relation brother --tail 3
    pyg-degreembed saturation --dataset family --relation brother
    pyg-degreembed plot --checkpoint runs/family.pt --out embedding.png

A failure exits with status 2 and one line :obj:`error: ...` on stderr.
"""
import argparse
import os
import sys
from typing import List, Optional

import torch
from torch_geometric import seed_everything

from .checkpoint import (CheckpointError, check_kg, load_checkpoint,
                         model_from_checkpoint, save_json)
from .datasets import load_dataset
from .distributed import init_from_env, world
from .evaluation import TIE_POLICIES, compute_ranks
from .explain import explain
from .io import KGFormatError
from .kg import relation_name
from .nn import DegreEmbedReasoner, RuleReasoner
from .runtime import retain_freed_memory
from .saturation import saturation, saturation_table
from .training import fit

MODELS = {
    'degreembed': (DegreEmbedReasoner, {}),
    'drum': (RuleReasoner, {}),
    'neurallp': (RuleReasoner, {'rank': 1}),
}


class CLIError(Exception):
    r"""A user error reported as one line."""


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    retain_freed_memory()
    try:
        args.handler(args)
    except (CLIError, CheckpointError, KGFormatError, FileNotFoundError,
            ValueError) as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print('error: interrupted', file=sys.stderr)
        return 130
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='pyg-degreembed',
        description='Learn logic rules on knowledge graphs (DegreEmbed, '
        'DRUM, Neural LP), predict links and explain them.')
    sub = parser.add_subparsers(dest='command', required=True)

    p = sub.add_parser('train', help='train and evaluate a model')
    p.add_argument('--dataset', default='family',
                   help="bundled name (family, kinship, umls), a Neural-LP "
                   "folder or a triples file (default: family)")
    p.add_argument('--model', default='degreembed', choices=list(MODELS))
    p.add_argument('--steps', type=int, default=2,
                   help='maximum rule length L (default: 2)')
    p.add_argument('--rank', type=int, default=3,
                   help='rank T (default: 3; neurallp uses 1)')
    p.add_argument('--dim', type=int, default=128,
                   help='embedding and LSTM size (default: 128)')
    p.add_argument('--epochs', type=int, default=10)
    p.add_argument('--patience', type=int, default=3)
    p.add_argument('--batch-size', type=int, default=128)
    p.add_argument('--lr', type=float, default=1e-3)
    p.add_argument('--loss', default='nll', choices=['nll', 'bce'])
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--device', default='cpu')
    p.add_argument('--recompute', action='store_true',
                   help='memory-lean: recompute each hop in the backward '
                   'pass instead of storing it (slower)')
    p.add_argument('--checkpoint', default=None,
                   help='checkpoint file, written every epoch '
                   '(default: runs/<dataset>-<model>.pt)')
    p.add_argument('--resume', action='store_true',
                   help='continue from --checkpoint if it exists')
    p.add_argument('--json', default=None,
                   help='metrics file (default: the checkpoint with .json)')
    p.add_argument('--no-progress', action='store_true')
    p.set_defaults(handler=cmd_train)

    p = sub.add_parser('evaluate', help='filtered ranking metrics')
    _checkpoint_args(p)
    p.add_argument('--split', default='test', choices=['valid', 'test'])
    p.add_argument('--json', default=None, help='write the metrics here')
    p.set_defaults(handler=cmd_evaluate)

    p = sub.add_parser('predict', help="top-k answers of 'head relation ?'")
    _checkpoint_args(p)
    p.add_argument('--head', required=True, help='head entity name')
    p.add_argument('--relation', required=True,
                   help="relation name (inv_<name> asks for heads)")
    p.add_argument('--k', type=int, default=10)
    p.set_defaults(handler=cmd_predict)

    p = sub.add_parser('rules', help='the learned rules')
    _checkpoint_args(p)
    p.add_argument('--relation', default=None,
                   help='one relation (default: all, inverses included)')
    p.add_argument('--k', type=int, default=5)
    p.add_argument('--no-inverse', action='store_true',
                   help='without --relation: only the R forward queries')
    p.add_argument('--json', default=None, help='write the rules here')
    p.set_defaults(handler=cmd_rules)

    p = sub.add_parser('explain',
                       help='the rule paths behind one predicted answer')
    _checkpoint_args(p)
    p.add_argument('--head', required=True)
    p.add_argument('--relation', required=True)
    p.add_argument('--tail', required=True)
    p.add_argument('--k', type=int, default=10, help='paths to show')
    p.set_defaults(handler=cmd_explain)

    p = sub.add_parser('saturation',
                       help='macro/micro/comprehensive saturation of '
                       'rule patterns')
    p.add_argument('--dataset', default='family')
    p.add_argument('--steps', type=int, default=2,
                   help='maximum pattern length (default: 2)')
    p.add_argument('--graph', default='all', choices=['all', 'observed'],
                   help='triples forming the graph (default: all splits, '
                   'as the paper)')
    p.add_argument('--inverse', action='store_true',
                   help='count paths along inverse edges too')
    p.add_argument('--relation', default=None, help='one relation')
    p.add_argument('--top', type=int, default=5,
                   help='patterns shown per relation')
    p.add_argument('--json', default=None, help='write all values here')
    p.set_defaults(handler=cmd_saturation)

    p = sub.add_parser('plot', help='t-SNE plot of the degree embeddings')
    _checkpoint_args(p)
    p.add_argument('--out', default='embedding.png')
    p.add_argument('--top', type=int, default=10)
    p.set_defaults(handler=cmd_plot)
    return parser


def _checkpoint_args(p):
    p.add_argument('--checkpoint', required=True)
    p.add_argument('--dataset', default=None,
                   help='the KG (default: the one the model was trained on)')
    p.add_argument('--device', default='cpu')


def cmd_train(args):
    # Under torchrun (WORLD_SIZE > 1): one process per device, gloo on the
    # CPU, NCCL on GPUs; process 0 prints and writes.
    if init_from_env() and torch.cuda.is_available():
        args.device = f'cuda:{torch.cuda.current_device()}'
    process = world()[1]
    data = load_dataset(args.dataset)
    cls, fixed = MODELS[args.model]
    config = dict(num_steps=args.steps, rank=args.rank,
                  embedding_dim=args.dim, hidden_channels=args.dim,
                  recompute=args.recompute)
    config.update(fixed)
    name = os.path.basename(os.path.normpath(args.dataset))
    checkpoint = args.checkpoint or os.path.join('runs',
                                                 f'{name}-{args.model}.pt')
    seed_everything(args.seed)
    model = cls(data.num_relations, **config)
    if process == 0:
        print(f'{data.num_nodes} entities, {data.num_relations} relations, '
              f'{data.train_edge_type.numel()} training triples; {model}')
    fit(model, data, epochs=args.epochs, batch_size=args.batch_size,
        lr=args.lr, patience=args.patience, loss=args.loss, seed=args.seed,
        device=torch.device(args.device), progress=not args.no_progress,
        checkpoint=checkpoint, resume=args.resume)
    json_path = args.json or os.path.splitext(checkpoint)[0] + '.json'
    if process == 0:
        print(f'checkpoint: {checkpoint}')
    _report(model, data, 'test', json_path, quiet=process != 0)


def cmd_evaluate(args):
    model, data = _load(args)
    _report(model, data, args.split, args.json)


def cmd_predict(args):
    model, data = _load(args)
    head = _entity(data, args.head)
    relation = _relation(data, args.relation)
    scores = model(data, [head], [relation])[0].cpu()
    k = min(args.k, data.num_nodes)
    values, index = scores.topk(k)
    print(f'{args.head} {relation_name(data, relation)} ?')
    print(f"{'rank':>4}  {'score':>10}  entity")
    for place, (value, e) in enumerate(zip(values.tolist(),
                                           index.tolist()), start=1):
        if value <= 0:
            print(f'      (the other {data.num_nodes - place + 1} entities '
                  'score 0)')
            break
        print(f'{place:>4}  {value:10.4g}  {data.entity_names[e]}')


def cmd_rules(args):
    model, data = _load(args)
    rules = (model.rules(_relation(data, args.relation), args.k)
             if args.relation else
             model.rules(k=args.k, inverse=not args.no_inverse))
    out = []
    for rule in rules:
        print(rule.format(data.relation_names))
        out.append({
            'head': relation_name(data, rule.head),
            'body': [relation_name(data, k) for k in rule.body],
            'confidence': rule.confidence,
            'text': rule.format(data.relation_names),
        })
    if args.json:
        save_json(args.json, out)


def cmd_explain(args):
    model, data = _load(args)
    head, tail = _entity(data, args.head), _entity(data, args.tail)
    relation = _relation(data, args.relation)
    result = explain(model, data, head, relation, tail)
    print(f'score of {args.tail} for ({args.head}, '
          f'{relation_name(data, relation)}, ?): {result.score:.4g}')
    for path in result.paths[:args.k]:
        print('  ' + path.format(data.entity_names, data.relation_names))
    rest = len(result.paths) - args.k
    if rest > 0:
        print(f'  ... and {rest} more paths')


def cmd_saturation(args):
    data = load_dataset(args.dataset)
    relations = None if args.relation is None else \
        [_relation(data, args.relation)]
    if relations and relations[0] >= data.num_relations:
        raise CLIError('saturation is defined for relations, not inverses')
    items = saturation(data, args.steps, graph=args.graph,
                       inverse=args.inverse, relations=relations)
    print(saturation_table(items, list(data.relation_names), args.top))
    if args.json:
        save_json(args.json, [{
            'relation': data.relation_names[s.relation],
            'pattern': [relation_name(data, k) for k in s.pattern],
            'macro': s.macro, 'micro': s.micro,
            'comprehensive': s.comprehensive} for s in items])


def cmd_plot(args):
    from .plot import plot_entity_embedding
    model, data = _load(args)
    plot_entity_embedding(model, data, args.out,
                          top=args.top,
                          relation_names=list(data.relation_names))
    print(f'plot: {args.out}')


def _load(args):
    payload = load_checkpoint(args.checkpoint)
    source = args.dataset or payload['kg'].get('source')
    if source is None:
        raise CLIError(f'{args.checkpoint} does not record its dataset; '
                       'pass --dataset')
    data = load_dataset(source)
    check_kg(payload, data, args.checkpoint)
    model = model_from_checkpoint(payload).to(torch.device(args.device))
    model.eval()
    return model, data


def _entity(data, name: str) -> int:
    try:
        return data.entity_names.index(name)
    except ValueError:
        raise CLIError(f'unknown entity {name!r}') from None


def _relation(data, name: str) -> int:
    names = list(data.relation_names)
    if name in names:
        return names.index(name)
    if name.startswith('inv_') and name[4:] in names:
        return names.index(name[4:]) + data.num_relations
    more = ', ...' if len(names) > 10 else ''
    raise CLIError(f"unknown relation {name!r} (known: "
                   f"{', '.join(names[:10])}{more})")


def _report(model, data, split, json_path, quiet=False):
    ranks = compute_ranks(model, data, split)
    metrics = {tie: ranks.metrics(tie, list(data.relation_names))
               for tie in TIE_POLICIES}
    if quiet:
        return
    print(f'\nfiltered {split} metrics ({ranks.relation.numel()} queries, '
          'both directions)')
    print(f"{'ties':<12}{'MRR':>8}{'MR':>9}{'H@1':>8}{'H@3':>8}{'H@10':>8}")
    for tie, m in metrics.items():
        print(f"{tie:<12}{m['mrr']:8.4f}{m['mr']:9.2f}{m['hits@1']:8.4f}"
              f"{m['hits@3']:8.4f}{m['hits@10']:8.4f}")
    if json_path:
        save_json(json_path, {'split': split, 'metrics': metrics})
        print(f'metrics: {json_path}')


if __name__ == '__main__':
    sys.exit(main())
