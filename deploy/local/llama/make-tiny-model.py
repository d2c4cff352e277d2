"""A tiny llama-architecture model with random weights, as GGUF, for tests that need a real inference
engine on a CPU machine: no download beyond PyPI's `gguf` and `numpy`, about 0.6 MB, a few
milliseconds per token on llama.cpp. Its SentencePiece vocabulary (350 tokens) has byte fallback, single
letters and multi-letter pieces, so a text prefix re-tokenises into other ids than were sampled, as it
does with real models. The text it writes is noise; what matters is that it is a real engine's output.

Byte tokens cover ASCII only (0x00-0x7F), so every sampled token completes a character: llama.cpp's
stream leaves out the ids of tokens that end inside a multi-byte character, and a test that checks
every id needs a model that never samples one (the router records that gap as an incomplete span; its
unit specs cover it). Prompts must be ASCII for the same reason.

Usage: python make-tiny-model.py OUT.gguf [SEED [WIDTH]]

WIDTH (default 64) sets the embedding size; above 64 the model has 4 layers. A wider model is slower per
token, which a test that kills an engine mid-stream needs (the default one writes a whole answer in a
millisecond or two).
"""
import numpy as np, gguf, string, itertools, sys
out = sys.argv[1]
rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
tokens, scores, types = [], [], []
def add(t, s, ty):
    tokens.append(t); scores.append(s); types.append(ty)
add("<unk>", 0.0, gguf.TokenType.UNKNOWN); add("<s>", 0.0, gguf.TokenType.CONTROL); add("</s>", 0.0, gguf.TokenType.CONTROL)
for b in range(128): add("<0x%02X>" % b, 0.0, gguf.TokenType.BYTE)
letters = string.ascii_lowercase
for c in letters + " .,!?": add(c if c != " " else "\u2581", -1.0, gguf.TokenType.NORMAL)
for c in letters: add("\u2581" + c, -2.0, gguf.TokenType.NORMAL)
for a, b in itertools.product("etaoinshr", repeat=2): add(a + b, -3.0, gguf.TokenType.NORMAL)
for a, b in itertools.product("etaoinshr", repeat=2): add("\u2581" + a + b, -4.0, gguf.TokenType.NORMAL)
V = len(tokens); E = int(sys.argv[3]) if len(sys.argv) > 3 else 64; L = 4 if E > 64 else 2; H = 4; F = 2 * E
w = gguf.GGUFWriter(out, "llama")
w.add_name("robustrl-tiny-random"); w.add_context_length(512); w.add_embedding_length(E); w.add_block_count(L)
w.add_feed_forward_length(F); w.add_head_count(H); w.add_head_count_kv(H); w.add_rope_dimension_count(E // H)
w.add_layer_norm_rms_eps(1e-5); w.add_file_type(gguf.LlamaFileType.ALL_F32); w.add_vocab_size(V)
w.add_tokenizer_model("llama"); w.add_token_list(tokens); w.add_token_scores(scores); w.add_token_types(types)
w.add_bos_token_id(1); w.add_eos_token_id(2); w.add_unk_token_id(0); w.add_add_bos_token(True); w.add_add_eos_token(False)
w.add_chat_template("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
def t(name, shape, scale=0.2):
    w.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))
t("token_embd.weight", (V, E)); w.add_tensor("output_norm.weight", np.ones(E, np.float32)); t("output.weight", (V, E))
for i in range(L):
    w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(E, np.float32)); w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(E, np.float32))
    for n in ("attn_q", "attn_k", "attn_v", "attn_output"): t(f"blk.{i}.{n}.weight", (E, E))
    t(f"blk.{i}.ffn_gate.weight", (F, E)); t(f"blk.{i}.ffn_up.weight", (F, E)); t(f"blk.{i}.ffn_down.weight", (E, F))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
print(out, V, "tokens")
