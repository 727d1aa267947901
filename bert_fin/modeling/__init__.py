"""bert_fin.modeling: google-research/bert's model, faithful names and maths, in TF 1.x graph style.

Public API (import as `from bert_fin import modeling`):
  BertConfig, BertModel, attention_mask, get_masked_lm_output, get_next_sentence_output,
  gather_indexes, get_assignment_map_from_checkpoint, init_from_checkpoint, gelu, get_activation,
  layer_norm, create_initializer, get_shape_list.
(The losses that read the record features are bert_fin.training.graph.losses.pretraining_losses.)
"""
from bert_fin.modeling.attention import attention_mask
from bert_fin.modeling.bert import BertModel
from bert_fin.modeling.bert import embedding_lookup
from bert_fin.modeling.bert import embedding_postprocessor
from bert_fin.modeling.checkpoint import CheckpointReport
from bert_fin.modeling.checkpoint import get_assignment_map_from_checkpoint
from bert_fin.modeling.checkpoint import init_from_checkpoint
from bert_fin.modeling.config import BertConfig
from bert_fin.modeling.heads import gather_indexes
from bert_fin.modeling.heads import get_masked_lm_output
from bert_fin.modeling.heads import get_next_sentence_output
from bert_fin.modeling.layers import create_initializer
from bert_fin.modeling.layers import gelu
from bert_fin.modeling.layers import get_activation
from bert_fin.modeling.layers import get_shape_list
from bert_fin.modeling.layers import layer_norm
from bert_fin.modeling.transformer import transformer_model
