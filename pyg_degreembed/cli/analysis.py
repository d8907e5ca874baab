r"""The commands that look at a KG or a model: :obj:`saturation` (rule
patterns of the data) and :obj:`plot` (t-SNE of the degree embeddings)."""


from pyg_degreembed.cli.common import (CLIError, _checkpoint_args, _command,
                                       _load, _relation)
from pyg_degreembed.data.datasets import dataset_path, load_dataset
from pyg_degreembed.data.kg import relation_name
from pyg_degreembed.interpret.saturation import saturation, saturation_table
from pyg_degreembed.training.checkpoint import save_json
from pyg_degreembed.training.files import check_output, input_files


def _saturation_parser(sub):
    p = _command(sub, 'saturation',
                 'macro/micro/comprehensive saturation of rule patterns')
    p.add_argument('--dataset', default='family',
                   help='bundled name, Neural-LP folder or triples file')
    p.add_argument('--steps', type=int, default=2,
                   help='maximum pattern length')
    p.add_argument('--graph', default='all', choices=['all', 'observed'],
                   help='triples forming the graph (all splits is the '
                   "paper's convention)")
    p.add_argument('--inverse', action='store_true',
                   help='count paths along inverse edges too')
    p.add_argument('--relation', default=None,
                   help='one relation (None: all)')
    p.add_argument('--top', type=int, default=5,
                   help='patterns shown per relation')
    p.add_argument('--json', default=None,
                   help='write all values here (None: do not)')
    p.set_defaults(handler=cmd_saturation)


def _plot_parser(sub):
    p = _command(sub, 'plot', 't-SNE plot of the degree embeddings')
    _checkpoint_args(p)
    p.add_argument('--out', default='embedding.png', help='the PNG file')
    p.add_argument('--top', type=int, default=10,
                   help='degree-type classes to colour')
    p.set_defaults(handler=cmd_plot)


def cmd_saturation(args):
    if args.top < 0:
        raise CLIError(f'--top must be at least 0, got {args.top}')
    if args.json:
        check_output(args.json, 'saturation values', 'json',
                     input_files(dataset_path(args.dataset)))
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
    from pyg_degreembed.interpret.plot import plot_entity_embedding
    if args.top < 0:
        raise CLIError(f'--top must be at least 0, got {args.top}')
    _, model, data = _load(args, [(args.out, 'plot', 'png')])
    plot_entity_embedding(model, data, args.out,
                          top=args.top,
                          relation_names=list(data.relation_names))
    print(f'plot: {args.out}')
