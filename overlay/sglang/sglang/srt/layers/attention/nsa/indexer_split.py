"""The DSA indexer as one split op of SGLang's piecewise CUDA graph (nvfp4-overlay; SGLang 0.5.9 only).

SGLang 0.5.9 compiles DSA models (GLM-5, DeepSeek-V3.2) with ``--enable-piecewise-cuda-graph``, with
their DSA indexer inside the graph: dynamo stops in ``Indexer.forward_cuda`` on a data-dependent branch
(``seq_lens_cpu.max().item()`` compared with the top-k), and past it would meet the indexer's tvm-ffi
Hadamard kernel, its KV-index store and sgl-kernel's top-k. SGLang 0.5.15 runs the whole prefill indexer
as one eager split op of the graph (``pcg_dsa_indexer_prefill_split``); this is that design for 0.5.9,
whose own indexer code runs unchanged inside the op:

- ``split_while_compiled``, a class decorator on ``Indexer`` (one line of the series' patch): each
  indexer is listed by its layer id when made; while SGLang's piecewise CUDA graph is compiled, captured
  or replayed (``is_in_piecewise_cuda_graph()``) ``forward_cuda`` allocates the top-k buffer at the
  graph's token count (-1: no index, as the indexer's own padding) and calls the split op, which
  dynamo never traces; otherwise ``forward_cuda`` runs as released;
- ``nsa_indexer_split`` (``torch.ops.sglang.nsa_indexer_split``, a split op): the released
  ``forward_cuda`` run eagerly on the split op's inputs with the forward batch of SGLang's forward
  context, its top-k copied into the buffer (the rows it returns; padding rows stay -1).
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

import torch

from sglang.srt.compilation.compilation_config import register_split_op
from sglang.srt.compilation.piecewise_context_manager import get_forward_context, is_in_piecewise_cuda_graph
from sglang.srt.utils.custom_op import register_custom_op

_INDEXERS: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()  # layer id -> its Indexer


@register_custom_op(mutates_args=["topk_result"])
@register_split_op()
def nsa_indexer_split(layer_id: int, x: torch.Tensor, q_lora: torch.Tensor, positions: torch.Tensor,
                      topk_result: torch.Tensor) -> None:
    indexer = _INDEXERS[layer_id]
    forward_batch = get_forward_context().forward_batch
    found = indexer._released_forward_cuda(x, q_lora, positions, forward_batch, layer_id)
    if found is not None:
        topk_result[: found.shape[0]].copy_(found)


def split_while_compiled(indexer_class: type) -> type:
    """Indexer, listed by layer id when made, and its forward_cuda the split op inside the piecewise graph."""
    released_init, released_forward = indexer_class.__init__, indexer_class.forward_cuda

    @functools.wraps(released_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        released_init(self, *args, **kwargs)
        _INDEXERS[self.layer_id] = self

    @functools.wraps(released_forward)
    def forward_cuda(self: Any, x: Any, q_lora: torch.Tensor, positions: torch.Tensor, forward_batch: Any,
                     layer_id: int, return_indices: bool = True) -> Any:
        if not is_in_piecewise_cuda_graph() or not return_indices or isinstance(x, tuple):
            return released_forward(self, x, q_lora, positions, forward_batch, layer_id, return_indices)
        topk_result = torch.full((x.shape[0], self.index_topk), -1, dtype=torch.int32, device=x.device)
        nsa_indexer_split(layer_id, x, q_lora, positions, topk_result)
        return topk_result

    indexer_class.__init__ = __init__  # type: ignore[misc]
    indexer_class.forward_cuda = forward_cuda  # type: ignore[attr-defined]
    indexer_class._released_forward_cuda = released_forward  # type: ignore[attr-defined]
    return indexer_class
