r"""The benchmark knowledge graphs of Neural LP, DRUM and DegreEmbed."""
import os.path as osp
import urllib.error
from typing import Callable, List, Optional

from torch_geometric.data import Data, InMemoryDataset, download_url

from .io import load_neural_lp, load_triples_file

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
    return osp.join(osp.dirname(osp.abspath(__file__)), 'data', name)


def load_dataset(spec: str) -> Data:
    r"""Loads a KG named by :obj:`spec`: a bundled dataset
    (:obj:`"family"`, :obj:`"kinship"`, :obj:`"umls"`), a Neural-LP folder
    or a single triples file (:func:`~pyg_degreembed.io.load_triples_file`
    with its default split).  The result records :obj:`spec` as
    :obj:`data.source`."""
    if spec in BUNDLED:
        data = load_neural_lp(bundled_path(spec))
    elif osp.isdir(spec):
        data = load_neural_lp(spec)
        spec = osp.abspath(spec)
    elif osp.isfile(spec):
        data = load_triples_file(spec)
        spec = osp.abspath(spec)
    else:
        raise FileNotFoundError(
            f"{spec!r} is neither a bundled dataset ({', '.join(BUNDLED)}) "
            'nor a folder nor a file')
    data.source = spec
    return data


class KGBenchmark(InMemoryDataset):
    r"""The knowledge-graph completion benchmarks in the Neural-LP split
    (facts / train / valid / test), as used by Neural LP, DRUM and
    DegreEmbed: Family, Kinship and UMLS (shipped with the package, work
    offline), WN18 and FB15k-237 (read from a folder).

    The single :class:`~torch_geometric.data.Data` object has the layout of
    :class:`~torch_geometric.datasets.RelLinkPredDataset` described in
    :mod:`pyg_degreembed.kg`: :obj:`edge_index`/:obj:`edge_type` are
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

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}({self.name})'
