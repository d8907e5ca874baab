r"""Checkpoints (one file with everything needed to resume or reuse a run)
and result files, written atomically.

A checkpoint is a plain dictionary of tensors, numbers, strings, lists and
dictionaries, so it loads with :obj:`torch.load(..., weights_only=True)`:

* :obj:`format` (:obj:`3`), :obj:`library_version`
* :obj:`digest`: the SHA-256 of everything else (:func:`payload_digest`),
  checked on load, so a damaged file is refused.  It is not keyed: it
  detects accidental damage (a truncated copy, a flipped byte, an edit
  that did not recompute it), not a forger.  What bounds a file edited on
  purpose is that loading runs no code (:obj:`weights_only=True`) and that
  every field is checked before anything is built
  (:func:`check_contents`: known fields only, model configurations within
  the constructors' limits and the machine's memory, weights of the shapes
  the configuration gives, rule ids within range)
* :obj:`model`: :obj:`{"class": ..., "config": {...}, "edge_weight":
  None or {"class": ..., "config": {...}, "trainable": bool}}` to rebuild
  the model (:func:`model_spec`)
* :obj:`kg`: :obj:`num_nodes`, :obj:`num_relations`, :obj:`relation_names`
  and :obj:`source` (how the KG was loaded) of the training KG
* :obj:`fit`: the training settings, a
  :class:`~pyg_degreembed.TrainConfig` as a dictionary
* :obj:`state`: :obj:`model`, :obj:`optimizer`, :obj:`best_model`,
  :obj:`epoch`, :obj:`history`, :obj:`best_epoch`, :obj:`best_valid_mrr`,
  and the RNG states (:obj:`torch_rng`, :obj:`shuffle_rng`)
* :obj:`rules` and :obj:`scorer` (optional, written by
  :obj:`pyg-degreembed train`): the
  :class:`~pyg_degreembed.interpret.applied_rules.AppliedRules` that rank
  answers
  with the model as tie-break
  (:meth:`~pyg_degreembed.interpret.applied_rules.AppliedRules.to_payload`),
  and
  which of the two ranks answers (:obj:`"rules"` or :obj:`"model"`)

Writes go to a temporary file in the same folder, then :func:`os.replace`,
so a crash never leaves a half-written checkpoint.

Format 2 (without a digest) is read with a warning that damage to it
cannot be detected; its contents are checked like any other's.  Format 1
(library versions before the edge weight became a constructor argument:
:obj:`DegreEmbedReasoner` kept its layer as :obj:`degree_embedding`) is
read and converted on load.
"""
import hashlib
import json
import math
import os
import warnings
from typing import Any, Dict, Optional, Union

import torch

from pyg_degreembed.training.files import (UnsafeFileError, atomic_write,
                                           load_plain)

FORMAT = 3
READABLE_FORMATS = (1, 2, 3)
#: What :func:`scorer_from_checkpoint` can rank with.
SCORERS = ('auto', 'rules', 'model')


class CheckpointError(ValueError):
    r"""A checkpoint cannot be read or does not fit the data or model."""


def save_checkpoint(path: str, payload: Dict[str, Any]):
    r"""Writes :obj:`payload` with its :func:`payload_digest` to
    :obj:`path` atomically."""
    payload = {key: value for key, value in payload.items()
               if key != 'digest'}
    payload['digest'] = payload_digest(payload)
    atomic_write(path, lambda f: torch.save(payload, f))


def payload_digest(payload: Any) -> str:
    r"""A SHA-256 of a checkpoint payload: its structure, every tensor's
    dtype, shape and bytes, and every other value's :func:`repr`
    (dictionaries in the order of their sorted keys)."""
    digest = hashlib.sha256()

    def feed(value):
        if isinstance(value, dict):
            digest.update(b'd%d' % len(value))
            for key in sorted(value, key=repr):
                feed(key)
                feed(value[key])
        elif isinstance(value, (list, tuple)):
            digest.update(b'l%d' % len(value))
            for item in value:
                feed(item)
        elif isinstance(value, torch.Tensor):
            tensor = value.detach().cpu().contiguous()
            digest.update(f't{tensor.dtype}{list(tensor.shape)}'.encode())
            digest.update(tensor.reshape(-1).view(torch.uint8).numpy())
        else:
            digest.update(repr(value).encode())

    feed(payload)
    return digest.hexdigest()


def save_json(path: str, payload: Any):
    r"""Writes :obj:`payload` as indented JSON to :obj:`path` atomically;
    a number that is not finite (:obj:`nan`, :obj:`inf`), which JSON
    cannot hold, is written as :obj:`null`."""
    def finite(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: finite(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [finite(v) for v in value]
        return value

    def write(f):
        json.dump(finite(payload), f, indent=2, allow_nan=False)
        f.write('\n')

    atomic_write(path, write, binary=False)


def load_checkpoint(path: str, map_location='cpu') -> Dict[str, Any]:
    r"""Reads a checkpoint written by :func:`save_checkpoint` (with
    :obj:`weights_only=True`), converted to the current format."""
    if not os.path.isfile(path):
        raise CheckpointError(f'{path}: checkpoint file not found')
    try:
        payload = load_plain(path, map_location)
    except UnsafeFileError as e:
        raise CheckpointError(f'{path}: refused: {e}; not a pyg_degreembed '
                              'checkpoint') from None
    if not isinstance(payload, dict) or \
            payload.get('format') not in READABLE_FORMATS:
        found = payload.get('format') if isinstance(payload, dict) else None
        raise CheckpointError(
            f'{path}: not a pyg_degreembed checkpoint of a format this '
            f'version reads ({", ".join(map(str, READABLE_FORMATS))}; '
            f'found {found!r})')
    digest = payload.pop('digest', None)
    if payload['format'] >= 3:
        if digest is None:
            raise CheckpointError(f'{path}: incomplete checkpoint (missing '
                                  'digest)')
        if digest != payload_digest(payload):
            raise CheckpointError(
                f'{path}: damaged: its content does not match the digest '
                'written with it (the file was corrupted or edited after it '
                'was written); use another copy or train again')
    missing = [key for key in ('model', 'kg', 'state') if key not in payload]
    missing += [f'state.{key}' for key in STATE_KEYS
                if key not in payload.get('state', {})]
    if missing:
        raise CheckpointError(f'{path}: incomplete checkpoint (missing '
                              f"{', '.join(missing)})")
    if payload['format'] == 1:
        payload = _from_format_1(payload)
    check_contents(payload, path)
    if digest is None:
        warnings.warn(f"{path}: a checkpoint of format {payload['format']}, "
                      'written without a digest: damage to it cannot be '
                      'detected (its contents are checked, not its weights)')
    return payload


#: The fields of a checkpoint (:func:`check_contents` refuses others).
FIELDS = ('format', 'library_version', 'model', 'kg', 'fit', 'state',
          'rules', 'scorer', 'model_relations', 'relation_settings',
          'new_graph')
RULES_FIELDS = ('config', 'relation', 'pattern', 'confidence',
                'type_confidence', 'support', 'groundings', 'constant_rules',
                'overlap_pairs', 'overlap_jaccard')


def _field_error(path: str, field: str, problem: str) -> CheckpointError:
    return CheckpointError(f'{path}: field {field}: {problem}')


def _known_keys(values: Any, allowed, path: str, field: str):
    if not isinstance(values, dict):
        raise _field_error(path, field, f'expected a dictionary, got '
                           f'{type(values).__name__}')
    unknown = sorted(set(values) - set(allowed), key=repr)
    if unknown:
        raise _field_error(path, field, f'unknown key {unknown[0]!r} '
                           f"(known: {', '.join(allowed)})")


def _constructor_keys(cls) -> tuple:
    import inspect
    return tuple(name for name in inspect.signature(cls).parameters
                 if name not in ('self', 'edge_weight', 'kwargs'))


def check_contents(payload: Dict[str, Any], path: str = 'checkpoint'):
    r"""Checks what a checkpoint describes before anything is built from it:
    only known fields; the model's configuration within the limits the
    constructors and the command line enforce, consistent with the KG it
    records and with the shapes of its weights; a model that fits the
    machine's memory; the training settings valid; the applied rules'
    tensors of one length each, with ids within range.  A problem raises
    :class:`CheckpointError` naming the field (the digest detects accidental
    damage; this check is what bounds a file edited on purpose)."""
    from pyg_degreembed.nn import DegreeEmbedding, RuleReasoner
    from pyg_degreembed.training.budget import check_memory
    from pyg_degreembed.training.config import TrainConfig
    _known_keys(payload, FIELDS, path, 'checkpoint')
    kg = payload['kg']
    _known_keys(kg, ('num_nodes', 'num_relations', 'relation_names',
                     'source', 'fingerprint'), path, 'kg')
    R = kg.get('num_relations')
    names = kg.get('relation_names')
    if not isinstance(R, int) or isinstance(R, bool) or R < 1 or \
            not isinstance(names, (list, tuple)) or len(names) != R or \
            not all(isinstance(n, str) for n in names):
        raise _field_error(path, 'kg', 'num_relations must be a positive '
                           'integer and relation_names that many strings')
    spec = payload['model']
    _known_keys(spec, ('class', 'config', 'edge_weight'), path, 'model')
    if spec.get('class') != 'RuleReasoner':
        raise _field_error(path, 'model.class', f"unknown model class "
                           f"{spec.get('class')!r}")
    config = spec.get('config')
    _known_keys(config, _constructor_keys(RuleReasoner), path,
                'model.config')
    if config.get('num_relations') != R:
        raise _field_error(path, 'model.config.num_relations',
                           f"{config.get('num_relations')!r}, but the KG it "
                           f'records has {R} relations')
    weight = spec.get('edge_weight')
    if weight is not None:
        _known_keys(weight, ('class', 'config', 'trainable'), path,
                    'model.edge_weight')
        if weight.get('class') == 'DegreeEmbedding':
            _known_keys(weight.get('config'),
                        _constructor_keys(DegreeEmbedding), path,
                        'model.edge_weight.config')
            if weight['config'].get('num_edge_types') != 2 * R:
                raise _field_error(
                    path, 'model.edge_weight.config.num_edge_types',
                    f"{weight['config'].get('num_edge_types')!r}, but the "
                    f'KG has {2 * R} edge types')

    try:
        with torch.device('meta'):  # nothing allocated
            model = RuleReasoner(
                **config, edge_weight=None if weight is None or
                weight.get('class') != 'DegreeEmbedding' else
                DegreeEmbedding(**weight['config']))
    except (TypeError, ValueError) as e:
        raise _field_error(path, 'model', str(e)) from None
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    check_memory(2 * sum(p.numel() * p.element_size()
                         for p in model.parameters()),
                 f'{path}: the model the checkpoint describes')
    for key in ('model', 'best_model'):
        _check_weights(payload['state'][key], shapes, path, f'state.{key}',
                       partial=weight is not None and
                       weight.get('class') != 'DegreeEmbedding')
    if 'fit' in payload:
        try:
            TrainConfig.from_dict(payload['fit'])
        except (TypeError, ValueError) as e:
            raise _field_error(path, 'fit', str(e)) from None
    if payload.get('rules') is not None:
        _check_rules(payload['rules'], R, kg.get('num_nodes'), path)
    _check_scorer(payload, '', R, path)
    _check_relation_settings(payload.get('relation_settings'), R, path)
    new_graph = payload.get('new_graph')
    if new_graph is not None:
        _known_keys(new_graph, ('scorer', 'unseen', 'model_relations'), path,
                    'new_graph')
        _check_scorer(new_graph, 'new_graph.', R, path)
        unseen = new_graph.get('unseen')
        if isinstance(unseen, bool) or not isinstance(unseen, (int, float)) \
                or not unseen >= 0:
            raise _field_error(path, 'new_graph.unseen', f'expected a '
                               f'number >= 0, got {unseen!r}')


def _check_scorer(choice: Dict[str, Any], prefix: str, R: int, path: str):
    # A scorer's name and, per-relation, where the model ranks (the fields
    # 'scorer' and 'model_relations' of `choice`, named with `prefix`).
    scorer = choice.get('scorer')
    if scorer not in (None, 'rules', 'model', 'per-relation'):
        raise _field_error(path, f'{prefix}scorer',
                           f'unknown scorer {scorer!r}')
    use_model = choice.get('model_relations')
    if scorer == 'per-relation' and not (
            isinstance(use_model, torch.Tensor) and
            use_model.dtype == torch.bool and
            tuple(use_model.shape) == (2 * R, )):
        raise _field_error(path, f'{prefix}model_relations',
                           f'expected a boolean tensor of shape [{2 * R}]')


def _check_relation_settings(settings: Any, R: int, path: str):
    # The aggregation of each query relation (field 'relation_settings'):
    # None, or {'settings': [[name, keys, weight, redundancy], ...],
    # 'index': a long tensor [2R] of indices into them}.
    if settings is None:
        return
    from pyg_degreembed.data.kg import check_positive_ints
    from pyg_degreembed.interpret.applied_rules import (Aggregation,
                                                        check_aggregation)
    field = 'relation_settings'
    if not isinstance(settings, dict) or \
            set(settings) != {'settings', 'index'}:
        raise _field_error(path, field, "expected a dictionary of "
                           "'settings' and 'index'")
    rows = settings['settings']
    try:
        for row in rows:
            name, keys, weight, redundancy = Aggregation(*row)
            check_aggregation(name, weight, redundancy)
            check_positive_ints(num_keys=keys)
    except (TypeError, ValueError) as e:
        raise _field_error(path, f'{field}.settings',
                           f'not a list of aggregations: {e}') from None
    index = settings['index']
    if not (isinstance(index, torch.Tensor) and index.dtype == torch.long
            and tuple(index.shape) == (2 * R, ) and
            (R == 0 or (int(index.min()) >= 0 and
                        int(index.max()) < len(rows)))):
        raise _field_error(path, f'{field}.index', f'expected a long '
                           f'tensor of shape [{2 * R}] of indices into '
                           f'the {len(rows)} settings')


def _check_weights(state: Any, shapes: Dict[str, tuple], path: str,
                   field: str, partial: bool):
    # A state dict of the model's tensors and shapes (partial: the edge
    # weight is a module of the user's, its tensors not in shapes).
    if not isinstance(state, dict):
        raise _field_error(path, field, 'expected a dictionary of tensors')
    for name, value in state.items():
        if name not in shapes:
            if partial and name.startswith('edge_weight.'):
                continue
            raise _field_error(path, f'{field}.{name}', 'not a weight of '
                               'the model the checkpoint describes')
        if not isinstance(value, torch.Tensor) or \
                tuple(value.shape) != shapes[name]:
            got = list(value.shape) if isinstance(value, torch.Tensor) else \
                type(value).__name__
            raise _field_error(path, f'{field}.{name}', f'{got} does not '
                               f'fit the model config ({list(shapes[name])})')
    missing = [name for name in shapes if name not in state]
    if missing:
        raise _field_error(path, f'{field}.{missing[0]}', 'missing')


def _check_rules(rules: Any, R: int, num_nodes: Any, path: str):
    from pyg_degreembed.data.kg import check_positive_ints, check_rule_length
    from pyg_degreembed.interpret.applied_rules import check_aggregation
    from pyg_degreembed.interpret.constant_rules import ConstantRules
    _known_keys(rules, RULES_FIELDS, path, 'rules')
    config = rules.get('config')
    _known_keys(config, ('num_relations', 'num_steps', 'num_keys',
                         'aggregation', 'model_weight', 'redundancy'), path,
                'rules.config')
    try:
        check_rule_length(config.get('num_steps'))
        check_positive_ints(num_keys=config.get('num_keys'))
        check_aggregation(config.get('aggregation', 'max-plus'),
                          config.get('model_weight', 0.),
                          config.get('redundancy'))
    except ValueError as e:
        raise _field_error(path, 'rules.config', str(e)) from None
    if config.get('num_relations') != R:
        raise _field_error(path, 'rules.config.num_relations',
                           f"{config.get('num_relations')!r}, but the KG "
                           f'has {R} relations')
    K = 2 * R
    limits = {'relation': (0, K),
              'pattern': (0, (K + 1)**config['num_steps'])}
    _check_columns(rules, ('relation', 'pattern', 'confidence', 'support',
                           'groundings'), limits, path, 'rules')
    types = rules.get('type_confidence')
    if not isinstance(types, torch.Tensor) or tuple(types.shape) != (K, K):
        raise _field_error(path, 'rules.type_confidence',
                           f'expected a tensor of shape [{K}, {K}]')
    constants = rules.get('constant_rules')
    if constants is not None:
        _known_keys(constants, ConstantRules.FIELDS +
                    ('num_nodes', 'num_edge_types'), path,
                    'rules.constant_rules')
        if constants.get('num_edge_types') != K or \
                constants.get('num_nodes') != num_nodes:
            raise _field_error(path, 'rules.constant_rules', 'its '
                               'num_nodes and num_edge_types are not the '
                               "KG's")
        _check_columns(constants, ConstantRules.FIELDS,
                       {'relation': (0, K), 'body_type': (0, K + 1),
                        'body_node': (-1, num_nodes),  # -1: any entity
                        'answer': (0, num_nodes)}, path,
                       'rules.constant_rules')
    _check_overlap(rules, path)


def _check_overlap(rules: dict, path: str):
    # The rules' overlaps (optional, both or neither): pairs of rule ids
    # [2, E] and their Jaccard index in [0, 1]; needed by a redundancy.
    pairs, jaccard = rules.get('overlap_pairs'), rules.get('overlap_jaccard')
    if pairs is None and jaccard is None:
        if rules['config'].get('redundancy') is not None:
            raise _field_error(path, 'rules.config.redundancy', 'the rules '
                               'hold no overlap_pairs to cluster by')
        return
    constants = rules.get('constant_rules')
    M = rules['relation'].numel() + (0 if constants is None else
                                     constants['relation'].numel())
    if not isinstance(pairs, torch.Tensor) or pairs.dim() != 2 or \
            pairs.size(0) != 2 or pairs.is_floating_point() or \
            (pairs.numel() and (int(pairs.min()) < 0 or
                                int(pairs.max()) >= M)):
        raise _field_error(path, 'rules.overlap_pairs', 'expected integer '
                           f'rule ids in [0, {M}), shape [2, E]')
    if not isinstance(jaccard, torch.Tensor) or \
            jaccard.shape != pairs.shape[1:] or \
            not jaccard.is_floating_point() or \
            (jaccard.numel() and not bool(((jaccard >= 0) &
                                           (jaccard <= 1)).all())):
        raise _field_error(path, 'rules.overlap_jaccard', 'expected one '
                           'index in [0, 1] per pair of overlap_pairs')


def _check_columns(values: dict, names, limits: Dict[str, tuple],
                   path: str, field: str):
    # 1-D tensors of one length (support and groundings optional); integer
    # ids in [low, high) for the limits (low, high).
    length = None
    for name in names:
        value = values.get(name)
        if value is None and name in ('support', 'groundings'):
            continue
        if not isinstance(value, torch.Tensor) or value.dim() != 1:
            raise _field_error(path, f'{field}.{name}', 'expected a '
                               'one-dimensional tensor')
        if length is not None and value.numel() != length:
            raise _field_error(path, f'{field}.{name}', f'{value.numel()} '
                               f'values, the other columns have {length}')
        length = value.numel()
        low, high = limits.get(name, (None, None))
        if low is not None and value.numel() and (
                value.is_floating_point() or int(value.min()) < low or
                int(value.max()) >= high):
            raise _field_error(path, f'{field}.{name}', f'ids must be '
                               f'integers in [{low}, {high})')


STATE_KEYS = ('model', 'optimizer', 'best_model', 'epoch', 'stopped',
              'history', 'best_epoch', 'best_valid_mrr', 'torch_rng',
              'shuffle_rng')


def kg_fingerprint(data) -> str:
    r"""A SHA-256 of a KG's entity and relation names and of the triples of
    each split (order-independent): two KGs share it only if every triple
    is in the same split, so a changed or re-split file is recognised."""
    from pyg_degreembed.data.kg import SPLITS, split_triples
    digest = hashlib.sha256()
    for names in (data.entity_names, data.relation_names):
        digest.update('\n'.join(names).encode() + b'\0')
    N, R = int(data.num_nodes), int(data.num_relations)
    for split in SPLITS:
        h, r, t = split_triples(data, split).long()
        key = torch.sort((h * R + r) * N + t).values
        digest.update(split.encode() + key.numpy().tobytes())
    return digest.hexdigest()


def _from_format_1(payload: Dict[str, Any]) -> Dict[str, Any]:
    # Format 1 named the model class (DegreEmbedReasoner or RuleReasoner)
    # and kept the degree embedding as the submodule 'degree_embedding'.
    spec, config = payload['model'], dict(payload['model']['config'])
    edge_weight = None
    if spec['class'] == 'DegreEmbedReasoner':
        edge_weight = {'class': 'DegreeEmbedding', 'trainable': True,
                       'config': dict(
                           num_edge_types=2 * config['num_relations'],
                           embedding_dim=config['embedding_dim'],
                           hidden_channels=config['hidden_channels'])}
    elif spec['class'] != 'RuleReasoner':
        raise CheckpointError(f"Unknown model class {spec['class']!r}")
    state = dict(payload['state'])
    for key in ('model', 'best_model'):
        state[key] = {name.replace('degree_embedding.', 'edge_weight.', 1):
                      value for name, value in state[key].items()}
    return {**payload, 'format': FORMAT, 'state': state,
            'model': {'class': 'RuleReasoner', 'config': config,
                      'edge_weight': edge_weight}}


def model_spec(model) -> Dict[str, Any]:
    r"""What a checkpoint records to rebuild :obj:`model`: the reasoner's
    constructor arguments and the class, arguments and trainability of its
    edge weight (:obj:`config` is :obj:`None` for a module without a
    :obj:`config()` method, which then cannot be rebuilt from the file)."""
    weight = model.edge_weight
    if weight is not None:
        config = weight.config() if hasattr(weight, 'config') else None
        weight = {'class': type(weight).__name__, 'config': config,
                  'trainable': any(p.requires_grad
                                   for p in weight.parameters())}
    return {'class': 'RuleReasoner', 'config': model.config(),
            'edge_weight': weight}


def model_from_checkpoint(payload: Dict[str, Any], best: bool = True):
    r"""Rebuilds the model of a checkpoint with its best (or last)
    weights."""
    from pyg_degreembed.nn import DegreeEmbedding, RuleReasoner
    spec = payload['model']
    edge_weight = spec['edge_weight']
    if edge_weight is not None:
        if edge_weight['class'] != 'DegreeEmbedding' or \
                edge_weight['config'] is None:
            raise CheckpointError(
                f"The model's edge weight is a {edge_weight['class']}, which "
                'cannot be rebuilt from the file: build the model yourself '
                "and load payload['state']['best_model']")
        edge_weight = DegreeEmbedding(**edge_weight['config'])
        edge_weight.requires_grad_(spec['edge_weight']['trainable'])
    model = RuleReasoner(**spec['config'], edge_weight=edge_weight)
    state = payload['state']
    model.load_state_dict(state['best_model'] if best else state['model'])
    return model


def load_model(path: str, dataset: Optional[Any] = None,
               device: Union[str, torch.device] = 'cpu',
               graph: Optional[Any] = None):
    r"""Loads a trained model and a KG to reason on from a checkpoint (of
    :func:`~pyg_degreembed.fit` or :obj:`pyg-degreembed train`), to carry
    on in Python.

    Args:
        path (str): The checkpoint file.
        dataset (str or KG, optional): The training KG (a bundled name, a
            folder or a triples file, see
            :func:`~pyg_degreembed.data.datasets.load_dataset`, or the KG in
            memory, any input :func:`~pyg_degreembed.as_kg` reads: a
            :obj:`Data`, a :obj:`HeteroData`, a PyG dataset), where it is
            not the path recorded in the checkpoint; it must hold the same
            triples in the same splits. (default: the recorded one)
        device (torch.device, optional): Where to put the model.
            (default: :obj:`"cpu"`)
        graph (str or KG, optional): Another KG to reason on instead (new
            entities, other triples: the inductive setting), given like
            :obj:`dataset`; its relations must be ones the model knows and
            are renumbered to the model's ids by name
            (:func:`~pyg_degreembed.data.convert.align_relations`).
            (default: :obj:`None`)

    :rtype: (:class:`~pyg_degreembed.RuleReasoner` with the best weights,
        in eval mode, :class:`~torch_geometric.data.Data`)
    """
    return model_and_data(load_checkpoint(path), path, dataset, device,
                          graph)


def model_and_data(payload: Dict[str, Any], path: str,
                   dataset: Optional[Any] = None,
                   device: Union[str, torch.device] = 'cpu',
                   graph: Optional[Any] = None):
    r""":func:`load_model` for a checkpoint already read from :obj:`path`
    (:func:`load_checkpoint`)."""
    from pyg_degreembed.data.convert import align_relations, as_kg
    from pyg_degreembed.data.datasets import load_dataset as load_path

    def load_dataset(spec):  # a path or name, or a KG in memory
        return load_path(spec) if isinstance(spec, (str, os.PathLike)) \
            else as_kg(spec)

    if graph is not None:
        if dataset is not None:
            raise CheckpointError('give the training KG (dataset) or '
                                  'another graph to reason on (graph), not '
                                  'both')
        data = align_relations(load_dataset(graph),
                               payload['kg']['relation_names'])
    else:
        source = payload['kg'].get('source') if dataset is None else dataset
        if source is None:
            raise CheckpointError(f'{path} does not record its dataset; '
                                  'pass the dataset')
        data = load_dataset(source)
        check_kg(payload, data, path)
    model = model_from_checkpoint(payload).to(torch.device(device))
    model.eval()
    return model, data


def scorer_from_checkpoint(payload: Dict[str, Any], model,
                           scorer: str = 'auto', new_graph: bool = False):
    r"""What ranks answers for a checkpoint: with :obj:`scorer="auto"`
    the scorer recorded in it (:obj:`"rules"`, its applied rules with
    :obj:`model` as tie-break, :obj:`"model"`, or :obj:`"per-relation"`,
    one of them per query relation; the model where it records none);
    :obj:`"rules"` requires the rules, :obj:`"model"` is the model
    alone.  With :obj:`new_graph` (reasoning on another KG than
    the training one) the rules rank without their constant rules, which
    name the training KG's entities, and with :obj:`scorer="auto"` the
    choice recorded for new graphs ranks (its field :obj:`new_graph`,
    :class:`~pyg_degreembed.training.scorer.NewGraphChoice`: made on
    validation ranked without those rules), where it records one; the
    rules' :math:`u` is that choice's whatever the scorer."""
    from pyg_degreembed.interpret.applied_rules import AppliedRules
    if scorer not in SCORERS:
        raise ValueError(f"'scorer' must be one of {SCORERS}, got "
                         f"{scorer!r}")
    rules = payload.get('rules')
    if scorer == 'rules' and rules is None:
        raise CheckpointError('the checkpoint holds no applied rules (train '
                              'with --scorer rules)')
    choice = payload
    if new_graph and payload.get('new_graph') is not None:
        choice = payload['new_graph']
    if scorer == 'auto':
        scorer = choice.get('scorer', 'model')
    if scorer == 'model' or rules is None:
        return model
    device = next(model.parameters()).device
    applied = AppliedRules.from_payload(rules, tie_break=model).to(device)
    if new_graph:
        applied = applied.without_constants(choice.get('unseen'))
    if scorer == 'per-relation':
        from pyg_degreembed.training.scorer import PerRelationScorer
        settings = None if new_graph else payload.get('relation_settings')
        return PerRelationScorer(
            applied, choice['model_relations'],
            *((None, None) if settings is None else
              (settings['settings'], settings['index']))).to(device)
    return applied


def check_kg(payload: Dict[str, Any], data, path: str = 'checkpoint'):
    r"""Refuses a KG that is not the one the checkpoint was trained on: other
    relations, or other triples or splits (its :func:`kg_fingerprint`)."""
    kg = payload['kg']
    if kg['num_relations'] != data.num_relations:
        raise CheckpointError(
            f"{path} was trained on a KG with {kg['num_relations']} "
            f"relations, but this KG has {data.num_relations}")
    if list(kg['relation_names']) != list(data.relation_names):
        raise CheckpointError(
            f'{path} was trained on a KG with other relation names '
            f"({', '.join(kg['relation_names'][:3])}, ...)")
    fingerprint = kg.get('fingerprint')
    if fingerprint is not None and fingerprint != kg_fingerprint(data):
        raise CheckpointError(
            f'{path} was trained on another KG with these relations: its '
            'triples or their split into facts/train/valid/test differ (a '
            'changed or re-split file); metrics would mix training and '
            'test triples. Use the original data, or reason on it as '
            'another graph (--graph, graph=)')
