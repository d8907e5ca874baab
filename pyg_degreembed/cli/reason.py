r"""The commands that reason with a trained checkpoint: :obj:`evaluate`,
:obj:`predict`, :obj:`rules` and :obj:`explain`."""


from pyg_degreembed.cli.common import (CLIError, _checkpoint_args, _command,
                                       _entity, _eval_candidates_arg, _load,
                                       _query_text, _relation, _report,
                                       _rule_text, _scorer)
from pyg_degreembed.data.kg import check_head_type, relation_name
from pyg_degreembed.evaluation.predict import predict, reflexive
from pyg_degreembed.interpret.anyburl import anyburl_lines, read_anyburl
from pyg_degreembed.interpret.explain import explain
from pyg_degreembed.training.checkpoint import SCORERS, save_json
from pyg_degreembed.training.scorer import (PerRelationScorer, describe,
                                            other_settings)


def _evaluate_parser(sub):
    p = _command(sub, 'evaluate', 'filtered ranking metrics')
    _checkpoint_args(p)
    p.add_argument('--scorer', default='auto', choices=list(SCORERS),
                   help="'auto': the one train chose (recorded in the "
                   "checkpoint)")
    p.add_argument('--split', default='test',
                   choices=['train', 'valid', 'test'],
                   help='the triples to rank (train: each query without '
                   'its own edge, as in training)')
    p.add_argument('--untyped', action='store_true',
                   help='in a typed KG (entity_types.txt), rank among all '
                   "entities, not only those of the answer's type")
    _eval_candidates_arg(p)
    p.add_argument('--anyburl', default=None,
                   help='rank with the rules of this AnyBURL rule file '
                   "instead (cyclic path rules; the checkpoint's model "
                   'breaks ties)')
    p.add_argument('--json', default=None,
                   help='write the metrics here (None: do not)')
    p.set_defaults(handler=cmd_evaluate)


def _predict_parser(sub):
    p = _command(sub, 'predict', "top-k new answers of 'head relation ?'")
    _checkpoint_args(p)
    _query_args(p)
    p.add_argument('--k', type=int, default=10, help='answers to show')
    p.add_argument('--untyped', action='store_true',
                   help='in a typed KG (entity_types.txt), list entities of '
                   "any type, not only the relation's answer type")
    p.add_argument('--show-known', action='store_true',
                   help='also list answers already in the KG, marked')
    p.add_argument('--scorer', default='auto', choices=list(SCORERS),
                   help="what ranks the answers; 'auto': the one train "
                   'chose (recorded in the checkpoint)')
    p.set_defaults(handler=cmd_predict)


def _rules_parser(sub):
    p = _command(sub, 'rules', 'the learned rules')
    _checkpoint_args(p)
    p.add_argument('--relation', default=None,
                   help='one relation (None: all, inverses included)')
    p.add_argument('--k', type=int, default=None,
                   help='rules per relation (None: 5; every rule with '
                   '--format anyburl)')
    p.add_argument('--no-inverse', action='store_true',
                   help='without --relation: only the R forward queries')
    p.add_argument('--confidence', default='grounded',
                   choices=['grounded', 'attention'],
                   help="grounded: each rule's share of the model's score "
                   'on the training queries (what the model does); '
                   'attention: the attention alone, relative to the best '
                   'rule')
    p.add_argument('--applied', action='store_true',
                   help="the checkpoint's applied rules instead: path rules "
                   'and answer-type rules with their empirical confidences')
    p.add_argument('--format', default='text', choices=['text', 'anyburl'],
                   help="'anyburl': the applied path and constant rules as "
                   'AnyBURL rule lines (predictions, correct predictions, '
                   'confidence, rule; --relation and --k select, --json '
                   'writes them as objects)')
    p.add_argument('--json', default=None,
                   help='write the rules here (None: do not)')
    p.set_defaults(handler=cmd_rules)


def _query_args(p):
    # The query (head, relation, ?) of predict and explain.
    p.add_argument('--head', required=True,
                   help='head entity: a name, or #index')
    p.add_argument('--relation', required=True,
                   help="relation name (inv_<name> asks for heads)")


def _explain_parser(sub):
    p = _command(sub, 'explain', 'the rule paths behind one predicted answer')
    _checkpoint_args(p)
    _query_args(p)
    p.add_argument('--tail', required=True,
                   help='the answer to explain: a name, or #index')
    p.add_argument('--k', type=int, default=10, help='paths to show')
    p.add_argument('--remove-edge', action='store_true',
                   help='explain a known fact by the other evidence: '
                   'without the edge (head, relation, tail) and its '
                   'inverse, as training scores it')
    p.add_argument('--plot', default=None,
                   help='draw the paths as a graph into this PNG file '
                   '(None: do not)')
    p.set_defaults(handler=cmd_explain)


def cmd_evaluate(args):
    payload, model, data = _load(args, [(args.json, 'metrics', 'json')])
    if data[f'{args.split}_edge_type'].numel() == 0:
        raise CLIError(f'the {args.split} split of {data.source} is empty: '
                       'nothing to evaluate')
    if args.anyburl:
        scorer = read_anyburl(args.anyburl, data.relation_names,
                              tie_break=model)
        scorer = scorer.to(next(model.parameters()).device)
        print(f'scorer: {scorer.rule_key.numel() // 2} cyclic path rules of '
              f'{args.anyburl} ({scorer.skipped} other rules skipped), the '
              'model breaking ties')
        return _report(scorer, data, args.split, args.json,
                       typed=not args.untyped,
                       num_candidates=args.eval_candidates)
    scorer = _scorer(args, payload, model, args.scorer, data)
    if isinstance(scorer, PerRelationScorer):
        others = other_settings(
            scorer.settings,
            scorer.relation_setting.masked_fill(scorer.use_model, 0))
        print(f'scorer: per query relation, the model '
              f'({int(scorer.use_model.sum())} of {scorer.use_model.numel()}'
              f') or {_rules_ranking(scorer.rules)}' +
              (f' (other aggregations: {others})' if others else '') +
              ' (--scorer rules|model: one of them)')
    elif scorer is not model:
        print(f'scorer: {_rules_ranking(scorer)} '
              '(--scorer model: the model alone)')
    new_graph = payload.get('new_graph')
    if args.graph is not None and not args.graph_choice and \
            new_graph is not None and scorer is not model:
        print(f"on a new graph: the rules without their constant rules, u = "
              f"{new_graph['unseen']:g}" + (
                  ', the choice for new graphs (made on validation ranked '
                  'without the constant rules)'
                  if args.scorer == 'auto' else ''))
    _report(scorer, data, args.split, args.json, typed=not args.untyped,
            num_candidates=args.eval_candidates)


def cmd_predict(args):
    payload, model, data = _load(args)
    scorer = _scorer(args, payload, model, args.scorer, data)
    head = _entity(data, args.head)
    relation = _relation(data, args.relation)
    if args.k < 0:
        raise CLIError(f'--k must be at least 0, got {args.k}')
    answers = predict(scorer, data, head, relation, args.k,
                      filter_known=not args.show_known,
                      typed=not args.untyped)
    print(f'query: {_query_text(data, head, relation)}')
    head_note = '' if reflexive(data, relation) else \
        '; the head itself is not an answer'
    if args.show_known:
        print('filter: none (answers already in the KG are marked '
              f'"known"){head_note}')
    else:
        print(f'filter: answers already in the KG (any split) are left out '
              f'(--show-known lists them){head_note}')
    if isinstance(scorer, PerRelationScorer):  # one ranks this relation
        scorer = scorer.ranker(relation)
    what = "the model's sum over rule paths" if scorer is model else \
        _rules_ranking(scorer)
    print(f"{'rank':>4}  {'score':>10}  entity    (score: {what}; higher "
          'first; not a probability)')
    for place, answer in enumerate(answers, start=1):
        marks = [m for m, on in (('known', answer.known),
                                 ('head', answer.is_head)) if on]
        mark = f"  ({', '.join(marks)})" if marks else ''
        print(f'{place:>4}  {answer.score:10.4g}  '
              f'{data.entity_names[answer.entity]}{mark}')
    if len(answers) < args.k:
        print('      (no other entity has a score above 0)')


def cmd_rules(args):
    if args.k is not None and args.k < 0:
        raise CLIError(f'--k must be at least 0, got {args.k}')
    payload, model, data = _load(args, [(args.json, 'rules', 'json')])
    relation = None if args.relation is None else \
        _relation(data, args.relation)
    if args.format == 'anyburl':
        applied = _scorer(args, payload, model, 'rules', data)
        lines = anyburl_lines(applied, data.relation_names, relation, args.k,
                              entity_names=data.entity_names)
        for line in lines:
            print(line)
        if args.json:
            save_json(args.json, [dict(zip(
                ('predictions', 'correct', 'confidence', 'rule'),
                (int(a), int(b), float(c), rule)))
                for a, b, c, rule in (line.split('\t') for line in lines)])
        return
    if args.k is None:
        args.k = 5
    if args.applied:
        return _applied_rules(args, payload, model, data, relation)
    rules = model.rules(relation, args.k, inverse=not args.no_inverse,
                        data=data, confidence=args.confidence)
    out = []
    for rule in rules:
        print(rule.format(data.relation_names))
        out.append({
            'head': relation_name(data, rule.head),
            'body': [relation_name(data, k) for k in rule.body],
            'confidence': rule.confidence,
            'confidence_kind': args.confidence,
            'text': rule.format(data.relation_names),
        })
    if args.json:
        save_json(args.json, out)


def _applied_rules(args, payload, model, data, relation):
    applied = _scorer(args, payload, model, 'rules', data)
    relations = [relation] if relation is not None else range(
        data.num_relations * (1 if args.no_inverse else 2))
    out = []
    for q in relations:
        for kind, rules in (
                ('path', applied.rules(q)[:args.k]),
                ('constant', applied.constant_rules_of(q)[:args.k]),
                ('answer type', applied.type_rules(q)[:args.k])):
            for rule in rules:
                text = _rule_text(rule, data)
                print(text)
                out.append({'head': relation_name(data, q), 'kind': kind,
                            'confidence': rule.confidence, 'text': text})
    if args.json:
        save_json(args.json, out)


def _rules_ranking(applied) -> str:
    # How applied rules rank, in words.
    if applied.model_weight:
        return ('the noisy-or of the applied rules and the model (weight '
                f'{applied.model_weight:g})')
    return f'the applied rules ({describe(applied.setting)}), the model as ' \
        'tie-break'


def _print_evidence(evidence, data):
    # The parts of a noisy-or score, each with its evidence -log(1 - p).
    print(f'noisy-or score {evidence.score:.6g} = 1 - prod(1 - p) of the '
          'parts below; their evidence -log(1 - p) adds up to '
          f'{sum(evidence.weights):.6g}:')
    for (part, p), weight in zip(evidence.parts, evidence.weights):
        text = "the model (its score over the query's best, times the " \
            'weight)' if part == 'model' else _rule_text(part, data)
        print(f'  {weight:8.4f}  p = {p:.4g}  {text}')


def cmd_explain(args):
    if args.k < 0:
        raise CLIError(f'--k must be at least 0, got {args.k}')
    payload, model, data = _load(args, [(args.plot, 'plot', 'png')])
    head, tail = _entity(data, args.head), _entity(data, args.tail)
    relation = _relation(data, args.relation)
    check_head_type(data, head, relation)
    result = explain(model, data, head, relation, tail,
                     remove_edge=args.remove_edge)
    print(f'score of {data.entity_names[tail]} for '
          f'{_query_text(data, head, relation)}'
          f'{" without its edge" if args.remove_edge else ""}: '
          f'{result.score:.4g} (the sum of the rule paths below)')
    for path in result.paths[:args.k]:
        print('  ' + path.format(data.entity_names, data.relation_names))
    rest = len(result.paths) - args.k
    if rest > 0:
        print(f'  ... and {rest} more paths')
    if payload.get('rules') is not None:
        applied = _scorer(args, payload, model, 'rules', data)
        ranker = _scorer(args, payload, model, 'auto', data)
        if isinstance(ranker, PerRelationScorer):
            ranker = ranker.ranker(relation)
        if ranker is model:
            role = 'the model ranks this query relation, not they'
        else:  # the rules under this query relation's aggregation
            applied = ranker
            role = f'ranked by {_rules_ranking(applied)}'
        rules, answer_type = applied.explain(data, head, relation, tail)
        print(f'applied rules that reach {args.tail} (best first; {role}):')
        for rule in rules[:args.k]:
            print('  ' + _rule_text(rule, data))
        if not rules:
            print('  none')
        if answer_type is not None:
            print('  best answer-type rule: ' +
                  answer_type.format(data.relation_names))
        if applied.aggregation == 'noisy-or':
            _print_evidence(applied.evidence(data, head, relation, tail),
                            data)
    if args.plot:
        from pyg_degreembed.interpret.plot import plot_explanation
        plot_explanation(result, args.plot, data.entity_names,
                         data.relation_names, max_paths=max(args.k, 1))
        print(f'plot: {args.plot}')
