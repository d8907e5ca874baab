"""How much does the reference code's test leakage into the degree features
change DegreEmbed's numbers?

    python benchmarks/leakage.py [--dataset kinship] [--seeds 0]

The authors' code built the degree features from facts + train + valid +
test (fault 2 in ../shared/design/METHOD.md).  This trains DegreEmbed twice
per seed with everything else equal: degree features from the observed graph
(this library) and from all splits (the reference code), and reports filtered
test metrics under realistic and optimistic ties.  The propagation graph is
the observed graph in both runs.  Writes results/leakage_<dataset>.json.
"""
import argparse

from torch_geometric import seed_everything

from pyg_degreembed import (DegreeEmbedding, DegreEmbedReasoner, RuleReasoner,
                            compute_ranks, fit)
from pyg_degreembed.data.datasets import load_dataset
from pyg_degreembed.data.features import degree_sets
from pyg_degreembed.data.kg import add_inverse_edges, all_triples

from common import machine, write_json

parser = argparse.ArgumentParser()
parser.add_argument('--dataset', default='kinship')
parser.add_argument('--seeds', type=int, nargs='+', default=[0])
parser.add_argument('--epochs', type=int, default=40)
args = parser.parse_args()

data = load_dataset(args.dataset)
R, N = data.num_relations, data.num_nodes
everything = all_triples(data)
leaky = degree_sets(*add_inverse_edges(everything[[0, 2]], everything[1], R),
                    N, 2 * R)


class LeakyDegreeEmbedding(DegreeEmbedding):
    r"""A degree embedding whose degree features come from every split."""
    def source_weights(self, graph, nodes=None):
        return self.weights_of_sets(leaky, nodes)


def leaky_degreembed(num_relations):
    return RuleReasoner(num_relations,
                        edge_weight=LeakyDegreeEmbedding(2 * num_relations))


result = {'dataset': args.dataset, 'machine': machine(), 'runs': []}
for seed in args.seeds:
    for label, build in (('observed graph', DegreEmbedReasoner),
                         ('all splits (leaky)', leaky_degreembed)):
        seed_everything(seed)
        model = build(R)
        fit_result = fit(model, data, epochs=args.epochs, patience=3,
                         seed=seed, progress=False, log=None)
        ranks = compute_ranks(model, data, 'test')
        row = {'features': label, 'seed': seed,
               'epochs': len(fit_result.history),
               'valid_mrr': fit_result.best_valid_mrr,
               'test_mrr_realistic': ranks.metrics('realistic')['mrr'],
               'test_mrr_optimistic': ranks.metrics('optimistic')['mrr'],
               'test_hits1_realistic': ranks.metrics('realistic')['hits@1']}
        result['runs'].append(row)
        print(row)
print('wrote', write_json(f'leakage_{args.dataset}.json', result))
