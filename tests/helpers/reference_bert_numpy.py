"""An independent numpy (float64) BERT forward pass: the test oracle for bert_fin.modeling.

Written from the BERT paper and google-research/bert's maths (tanh gelu, layer norm eps 1e-12,
-10000 attention adder, pooler = tanh(dense(first token)), run_pretraining.py's losses), not from
bert_fin's code. Weights come as a dict {google variable name: numpy array}.
"""
import numpy as np


def gelu(x):
  return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


ACTIVATIONS = {"gelu": gelu, "relu": lambda x: np.maximum(x, 0.0), "tanh": np.tanh,
               "linear": lambda x: x}


def layer_norm(x, gamma, beta, eps=1e-12):
  mean = x.mean(axis=-1, keepdims=True)
  var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def softmax(x, axis=-1):
  e = np.exp(x - x.max(axis=axis, keepdims=True))
  return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
  shifted = x - x.max(axis=axis, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def visibility(input_len, seq_length, sequence_ids=None):
  """allowed[b, i, j] = 1.0 if query i may attend key j (explicit loops, on purpose)."""
  batch = len(input_len)
  allowed = np.zeros([batch, seq_length, seq_length])
  for b in range(batch):
    for i in range(seq_length):
      for j in range(seq_length):
        ok = j < input_len[b]
        if sequence_ids is not None:
          ok = ok and sequence_ids[b][i] == sequence_ids[b][j] and sequence_ids[b][j] != 0
        allowed[b, i, j] = 1.0 if ok else 0.0
  return allowed


def _linear(w, prefix, x):
  return x @ w[prefix + "/kernel"] + w[prefix + "/bias"]


def encoder_layer(w, prefix, x, allowed, num_heads, act):
  """x: [B, S, H] -> ([B, S, H], the attention scores [B, N, S, S] before the mask's adder);
  prefix e.g. 'bert/encoder/layer_0'."""
  batch, seq, hidden = x.shape
  d = hidden // num_heads
  out_heads = np.zeros_like(x)
  all_scores = np.zeros([batch, num_heads, seq, seq])
  q = _linear(w, prefix + "/attention/self/query", x)
  k = _linear(w, prefix + "/attention/self/key", x)
  v = _linear(w, prefix + "/attention/self/value", x)
  for h in range(num_heads):
    cols = slice(h * d, (h + 1) * d)
    scores = np.einsum("bid,bjd->bij", q[..., cols], k[..., cols]) / np.sqrt(d)
    all_scores[:, h] = scores
    scores = scores + (1.0 - allowed) * -10000.0
    out_heads[..., cols] = np.einsum("bij,bjd->bid", softmax(scores), v[..., cols])
  attn = _linear(w, prefix + "/attention/output/dense", out_heads)
  attn = layer_norm(attn + x, w[prefix + "/attention/output/LayerNorm/gamma"],
                    w[prefix + "/attention/output/LayerNorm/beta"])
  inter = act(_linear(w, prefix + "/intermediate/dense", attn))
  out = _linear(w, prefix + "/output/dense", inter)
  return layer_norm(out + attn, w[prefix + "/output/LayerNorm/gamma"],
                    w[prefix + "/output/LayerNorm/beta"]), all_scores


def bert_forward(w, config, input_ids, input_len, token_type_ids, sequence_ids=None,
                 position_ids=None):
  """Returns dict(embedding_output [B,S,H], all_layers [list of B,S,H], sequence_output,
  pooled_output [B,H], attention_scores [list of B,N,S,S]) in float64. Packed rows: sequence_ids (visibility) and position_ids
  [B, S] (default 0..S-1 in every row)."""
  w = {name: np.asarray(value, np.float64) for name, value in w.items()}
  input_ids = np.asarray(input_ids)
  seq = input_ids.shape[1]
  emb = (w["bert/embeddings/word_embeddings"][input_ids]
         + w["bert/embeddings/token_type_embeddings"][np.asarray(token_type_ids)]
         + (w["bert/embeddings/position_embeddings"][:seq][None] if position_ids is None
            else w["bert/embeddings/position_embeddings"][np.asarray(position_ids)]))
  emb = layer_norm(emb, w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"])
  allowed = visibility(input_len, seq, sequence_ids)
  act = ACTIVATIONS[config.hidden_act]
  x = emb
  layers, scores = [], []
  for i in range(config.num_hidden_layers):
    x, layer_scores = encoder_layer(w, "bert/encoder/layer_%d" % i, x, allowed,
                                    config.num_attention_heads, act)
    layers.append(x)
    scores.append(layer_scores)
  pooled = np.tanh(_linear(w, "bert/pooler/dense", x[:, 0]))
  return {"embedding_output": emb, "all_layers": layers, "sequence_output": x,
          "pooled_output": pooled, "attention_scores": scores}


def masked_lm_loss(w, config, sequence_output, positions, label_ids, label_weights):
  """Returns (loss, per_example_loss [B*P], log_probs [B*P, vocab])."""
  w = {name: np.asarray(value, np.float64) for name, value in w.items()}
  picked = np.stack([sequence_output[b, p] for b in range(len(positions)) for p in positions[b]])
  h = ACTIVATIONS[config.hidden_act](_linear(w, "cls/predictions/transform/dense", picked))
  h = layer_norm(h, w["cls/predictions/transform/LayerNorm/gamma"],
                 w["cls/predictions/transform/LayerNorm/beta"])
  logits = h @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]
  log_probs = log_softmax(logits)
  ids = np.asarray(label_ids).reshape(-1)
  weights = np.asarray(label_weights, np.float64).reshape(-1)
  per_example = -log_probs[np.arange(len(ids)), ids]
  loss = np.sum(weights * per_example) / (np.sum(weights) + 1e-5)
  return loss, per_example, log_probs


def next_sentence_loss(w, pooled_output, labels):
  """Returns (loss, per_example_loss [B], log_probs [B, 2])."""
  weights = np.asarray(w["cls/seq_relationship/output_weights"], np.float64)
  bias = np.asarray(w["cls/seq_relationship/output_bias"], np.float64)
  log_probs = log_softmax(pooled_output @ weights.T + bias)
  labels = np.asarray(labels).reshape(-1)
  per_example = -log_probs[np.arange(len(labels)), labels]
  return per_example.mean(), per_example, log_probs
