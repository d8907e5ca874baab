r"""The benchmark knowledge graphs of Neural LP, DRUM and DegreEmbed."""
import os.path as osp
import urllib.error
from typing import Callable, List, Optional

from torch_geometric.data import Data, InMemoryDataset, download_url

from pyg_degreembed.data.io import load_neural_lp, load_triples_file
from pyg_degreembed.training.files import UnsafeFileError, load_plain

BUNDLED = ('family', 'kinship', 'umls')
NAMES = BUNDLED + ('wn18', 'fb15k-237')
RAW_FILES = ['entities.txt', 'relations.txt', 'facts.txt', 'train.txt',
             'valid.txt', 'test.txt']


def bundled_path(name: str) -> str:
    r"""The folder of a dataset that ships with the package
    (:obj:`"family"`, :obj:`"kinship"` or :obj:`"umls"`)."""
    if name not in BUNDLED:
        raise ValueError(f"No bundled dataset {name!r}; bundled are "
                         f"{', '.join(BUNDLED)}")
    return osp.join(osp.dirname(osp.abspath(__file__)), name)


def dataset_path(spec: str) -> str:
    r"""The folder or file :func:`load_dataset` reads for :obj:`spec`: a
    path that exists, else the bundled dataset of that name.  A path that
    exists comes first, so :obj:`"family"` in a folder that holds a
    :obj:`family` folder names that folder (:obj:`pyg-degreembed` says
    so)."""
    if osp.exists(spec):
        return spec
    if spec in BUNDLED:
        return bundled_path(spec)
    raise FileNotFoundError(
        f"{spec!r} is neither a bundled dataset ({', '.join(BUNDLED)}) nor "
        'a folder nor a file')


def load_dataset(spec: str) -> Data:
    r"""Loads a KG named by :obj:`spec`: a Neural-LP folder, a single
    triples file (:func:`~pyg_degreembed.data.io.load_triples_file` with its
    default split) or a bundled dataset (:obj:`"family"`,
    :obj:`"kinship"`, :obj:`"umls"`); see :func:`dataset_path`.  The result
    records :obj:`spec` (a path made absolute) as :obj:`data.source`."""
    path = dataset_path(spec)
    if osp.isdir(path):
        data = load_neural_lp(path)
    else:
        data = load_triples_file(path)
    data.source = spec if path != spec else osp.abspath(spec)
    return data


def _load_plain(path: str):
    # A processed file read without running code; a one-line error naming
    # the file for anything else.
    try:
        return load_plain(path)
    except UnsafeFileError as e:
        raise ValueError(f'{path}: refused: {e}; not a processed dataset of '
                         'this library: delete it, or pass force_reload=True '
                         'to process the raw files again') from None


class KGBenchmark(InMemoryDataset):
    r"""The knowledge-graph completion benchmarks in the Neural-LP split
    (facts / train / valid / test), as used by Neural LP, DRUM and
    DegreEmbed: Family, Kinship and UMLS (shipped with the package, work
    offline), WN18 and FB15k-237 (read from a folder).

    The single :class:`~torch_geometric.data.Data` object has the layout of
    :class:`~torch_geometric.datasets.RelLinkPredDataset` described in
    :mod:`pyg_degreembed.data.kg`: :obj:`edge_index`/:obj:`edge_type` are
    facts and train with inverse edges; valid and test triples are never
    edges.

    Args:
        root (str): Where the processed dataset is stored
            (:obj:`root/name/processed`).
        name (str): :obj:`"family"`, :obj:`"kinship"`, :obj:`"umls"`,
            :obj:`"wn18"` or :obj:`"fb15k-237"`.
        raw_folder (str, optional): A folder with the Neural-LP files
            (:obj:`entities.txt`, ..., :obj:`test.txt`).  By default the
            package's copy for the bundled datasets, else
            :obj:`root/name/raw`; for WN18 the files are downloaded there
            when absent.  (default: :obj:`None`)
        transform (callable, optional): Applied to the data on every access.
        pre_transform (callable, optional): Applied before saving.
        force_reload (bool, optional): Re-process the dataset.
            (default: :obj:`False`)
    """
    urls = {
        'wn18': ('https://raw.githubusercontent.com/fanyangxyz/Neural-LP/'
                 'master/datasets/wn-18'),
    }

    def __init__(self, root: str, name: str, raw_folder: Optional[str] = None,
                 transform: Optional[Callable] = None,
                 pre_transform: Optional[Callable] = None,
                 force_reload: bool = False):
        name = name.lower()
        if name not in NAMES:
            raise ValueError(f"Unknown dataset {name!r}; choose one of "
                             f"{', '.join(NAMES)}")
        self.name = name
        if raw_folder is None and name in BUNDLED:
            raw_folder = bundled_path(name)
        self._raw_folder = raw_folder
        super().__init__(root, transform, pre_transform,
                         force_reload=force_reload)
        self.load(self.processed_paths[0], data_cls=Data)

    @property
    def raw_dir(self) -> str:
        return self._raw_folder or osp.join(self.root, self.name, 'raw')

    @property
    def processed_dir(self) -> str:
        return osp.join(self.root, self.name, 'processed')

    @property
    def raw_file_names(self) -> List[str]:
        return RAW_FILES

    @property
    def processed_file_names(self) -> str:
        return 'data.pt'

    @property
    def num_relations(self) -> int:
        r"""The number :math:`R` of KG relations (the graph has :math:`2R`
        edge types)."""
        return int(self._data.num_relations)

    def download(self):
        if self.name not in self.urls:
            raise FileNotFoundError(
                f"The {self.name} files {RAW_FILES} are not in "
                f"'{self.raw_dir}'. Pass raw_folder= with a Neural-LP folder "
                f"of {self.name}.")
        for file_name in self.raw_file_names:
            url = f'{self.urls[self.name]}/{file_name}'
            try:
                download_url(url, self.raw_dir)
            except (urllib.error.URLError, OSError) as e:
                raise RuntimeError(
                    f"Could not download {url} ({e}). Without network "
                    f"access, put the {self.name} files {RAW_FILES} into "
                    f"'{self.raw_dir}' or pass raw_folder=.") from None

    def process(self):
        data = load_neural_lp(self.raw_dir)
        if self.pre_transform is not None:
            data = self.pre_transform(data)
        self.save([data], self.processed_paths[0])

    def _process(self):
        # PyG reads these two files back with weights_only=False: they must
        # pass the safe loader first.
        for name in ('pre_transform.pt', 'pre_filter.pt'):
            path = osp.join(self.processed_dir, name)
            if not self.force_reload and osp.exists(path):
                _load_plain(path)
        super()._process()

    def load(self, path: str, data_cls=Data):
        r"""Reads the processed file with :obj:`weights_only=True` only: a
        file that holds anything but tensors and plain data is refused,
        never run (PyG's loader falls back to full unpickling)."""
        out = _load_plain(path)
        try:
            data, self.slices, data_cls = out
            self.data = data_cls.from_dict(data)
        except (TypeError, ValueError, AttributeError) as e:
            raise ValueError(f'{path}: refused: not a processed dataset of '
                             f'this library ({e}); delete it, or pass '
                             'force_reload=True') from None

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}({self.name})'
