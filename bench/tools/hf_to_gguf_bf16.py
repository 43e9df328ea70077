#!/usr/bin/env python3
# Writes a Qwen3 Hugging Face checkpoint (bf16 safetensors, tokenizer.json) as a GGUF v3 file for llama.cpp, for a
# side-by-side benchmark outside the metainfer repository. Written from the GGUF specification (ggml docs/gguf.md):
# header, key/value metadata, tensor infos (ggml dims: innermost first), 32-byte aligned data. Pure python, no numpy,
# so it runs where pip cannot reach llama.cpp's converter. Handles Qwen3 dense checkpoints in one file
# (model.safetensors: metainfer synth-model's tiny and 0.6b presets, Qwen3-0.6B) or sharded with an index
# (model.safetensors.index.json: the 1.7b preset, Qwen3-1.7B): bf16 matrices stay bf16, 1-D norms become f32, a tied
# lm_head stays tied (a tied checkpoint's stored lm_head.weight, a copy of the embedding, is not written). Anything
# else it does not map (biases, rope scaling, sliding windows) is refused, never dropped.
# Usage: python3 bench/tools/hf_to_gguf_bf16.py CHECKPOINT_DIR OUT.gguf   (bench/zen5_avx512bf16_0.6b.md, session 34)
import json, struct, sys, os

if len(sys.argv) != 3:
    sys.exit('usage: hf_to_gguf_bf16.py CHECKPOINT_DIR OUT.gguf')
src, dst = sys.argv[1], sys.argv[2]
if os.path.exists(dst):
    sys.exit('%s exists: not overwritten' % dst)
def load_json(name):
    with open(os.path.join(src, name)) as j:
        return json.load(j)
for need in ('config.json', 'tokenizer.json'):
    if not os.path.isfile(os.path.join(src, need)):
        sys.exit('%s: no %s (expected a Hugging Face checkpoint directory)' % (src, need))
single = os.path.join(src, 'model.safetensors')
index_path = os.path.join(src, 'model.safetensors.index.json')
if os.path.isfile(single) == os.path.isfile(index_path):
    sys.exit('%s: expected exactly one of model.safetensors and model.safetensors.index.json' % src)
cfg = load_json('config.json')
cfg_path = os.path.join(src, 'config.json')
if cfg.get('model_type') != 'qwen3':
    sys.exit('%s: model_type %r, expected "qwen3"' % (cfg_path, cfg.get('model_type')))
for key, want in (('rope_scaling', None), ('attention_bias', False), ('use_sliding_window', False),
                  ('hidden_act', 'silu')):
    if cfg.get(key, want) != want:
        sys.exit('%s: %s is %r; this writer supports only %r' % (cfg_path, key, cfg.get(key), want))
if any(t != 'full_attention' for t in cfg.get('layer_types', [])):
    sys.exit('%s: layer_types other than full_attention are not supported' % cfg_path)
def is_int(v): return isinstance(v, int) and not isinstance(v, bool)
for key in ('num_hidden_layers', 'hidden_size', 'intermediate_size', 'num_attention_heads', 'num_key_value_heads',
            'head_dim', 'vocab_size', 'max_position_embeddings'):
    if not is_int(cfg.get(key)) or cfg[key] <= 0:
        sys.exit('%s: %s must be a positive integer, got %r' % (cfg_path, key, cfg.get(key)))
for key in ('rope_theta', 'rms_norm_eps'):
    if not isinstance(cfg.get(key), (int, float)) or isinstance(cfg.get(key), bool):
        sys.exit('%s: %s missing or not a number' % (cfg_path, key))
for key in ('bos_token_id', 'eos_token_id'):
    if not is_int(cfg.get(key)) or not 0 <= cfg[key] < cfg['vocab_size']:
        sys.exit('%s: %s must be one integer below vocab_size, got %r' % (cfg_path, key, cfg.get(key)))
tok = load_json('tokenizer.json')
if tok.get('model', {}).get('type') != 'BPE':
    sys.exit('%s: tokenizer model type %r, expected "BPE"' % (os.path.join(src, 'tokenizer.json'), tok.get('model', {}).get('type')))
# Each tensor's file (path, open handle, start of its data) and safetensors header entry. A sharded checkpoint's
# index maps tensor -> shard; every shard's own header must list the tensors the index puts there, and no more.
shards = {}  # shard file name -> (path, handle, data start, header)
def open_shard(name):
    if name not in shards:
        if not isinstance(name, str) or os.path.basename(name) != name or not name.endswith('.safetensors'):
            sys.exit('%s: shard name %r is not a .safetensors file in the checkpoint directory' % (index_path, name))
        path = os.path.join(src, name)
        if not os.path.isfile(path):
            sys.exit('%s: names %s, which does not exist' % (index_path, path))
        fh = open(path, 'rb')
        hlen = struct.unpack('<Q', fh.read(8))[0]
        shards[name] = (path, fh, 8 + hlen, json.loads(fh.read(hlen)))
    return shards[name]
if os.path.isfile(single):
    weight_map = {n: 'model.safetensors' for n in open_shard('model.safetensors')[3] if n != '__metadata__'}
else:
    weight_map = load_json('model.safetensors.index.json').get('weight_map')
    if not isinstance(weight_map, dict) or not weight_map:
        sys.exit('%s: no weight_map' % index_path)
header = {}; where = {}
for n, shard in weight_map.items():
    path, fh, data0, h = open_shard(shard)
    if n not in h:
        sys.exit('%s: the index puts %s in %s, whose header does not list it' % (index_path, n, path))
    header[n] = h[n]; where[n] = (path, fh, data0)
for name, (path, fh, data0, h) in shards.items():
    extra = [n for n in h if n != '__metadata__' and weight_map.get(n) != name]
    if extra:
        sys.exit('%s: tensor(s) the index does not place in this file: %s' % (path, ', '.join(extra[:5])))
st_path = index_path if os.path.isfile(index_path) else single

T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR = 4, 5, 6, 7, 8, 9
def s_str(x):
    b = x.encode('utf-8'); return struct.pack('<Q', len(b)) + b
kv = []
def add(key, typ, val):
    out = s_str(key) + struct.pack('<I', typ)
    if typ == T_U32: out += struct.pack('<I', val)
    elif typ == T_I32: out += struct.pack('<i', val)
    elif typ == T_F32: out += struct.pack('<f', val)
    elif typ == T_BOOL: out += struct.pack('<?', val)
    elif typ == T_STR: out += s_str(val)
    kv.append(out)
def add_arr(key, etyp, vals):
    out = s_str(key) + struct.pack('<I', T_ARR) + struct.pack('<IQ', etyp, len(vals))
    parts = []
    for v in vals:
        if etyp == T_STR: parts.append(s_str(v))
        elif etyp == T_I32: parts.append(struct.pack('<i', v))
    kv.append(out + b''.join(parts))

L = cfg['num_hidden_layers']
add('general.architecture', T_STR, 'qwen3')
add('general.name', T_STR, os.path.basename(os.path.abspath(src)))
add('general.file_type', T_U32, 32)  # mostly BF16
add('qwen3.block_count', T_U32, L)
add('qwen3.context_length', T_U32, cfg['max_position_embeddings'])
add('qwen3.embedding_length', T_U32, cfg['hidden_size'])
add('qwen3.feed_forward_length', T_U32, cfg['intermediate_size'])
add('qwen3.attention.head_count', T_U32, cfg['num_attention_heads'])
add('qwen3.attention.head_count_kv', T_U32, cfg['num_key_value_heads'])
add('qwen3.attention.key_length', T_U32, cfg['head_dim'])
add('qwen3.attention.value_length', T_U32, cfg['head_dim'])
add('qwen3.rope.freq_base', T_F32, float(cfg['rope_theta']))
add('qwen3.attention.layer_norm_rms_epsilon', T_F32, float(cfg['rms_norm_eps']))

# vocabulary: the BPE vocab and added tokens by id, padded to vocab_size
V = cfg['vocab_size']
tokens = [None] * V; types = [1] * V
ids = list(tok['model']['vocab'].values()) + [a['id'] for a in tok.get('added_tokens', [])]
if ids and max(ids) >= V:
    sys.exit('%s: token id %d is not below vocab_size %d' % (os.path.join(src, 'tokenizer.json'), max(ids), V))
for t, i in tok['model']['vocab'].items(): tokens[i] = t
for a in tok.get('added_tokens', []):
    tokens[a['id']] = a['content']; types[a['id']] = 3 if a.get('special') else 4
for i in range(V):
    if tokens[i] is None: tokens[i] = '[PAD%d]' % i; types[i] = 5
merges = [m if isinstance(m, str) else ' '.join(m) for m in tok['model']['merges']]
add('tokenizer.ggml.model', T_STR, 'gpt2')
add('tokenizer.ggml.pre', T_STR, 'qwen2')
add_arr('tokenizer.ggml.tokens', T_STR, tokens)
add_arr('tokenizer.ggml.token_type', T_I32, types)
add_arr('tokenizer.ggml.merges', T_STR, merges)
add('tokenizer.ggml.eos_token_id', T_U32, cfg['eos_token_id'])
add('tokenizer.ggml.bos_token_id', T_U32, cfg['bos_token_id'])
add('tokenizer.ggml.padding_token_id', T_U32, cfg['bos_token_id'])
add('tokenizer.ggml.add_bos_token', T_BOOL, False)

names = {'model.embed_tokens.weight': 'token_embd.weight', 'model.norm.weight': 'output_norm.weight'}
per = {'input_layernorm': 'attn_norm', 'post_attention_layernorm': 'ffn_norm', 'self_attn.q_proj': 'attn_q',
       'self_attn.k_proj': 'attn_k', 'self_attn.v_proj': 'attn_v', 'self_attn.o_proj': 'attn_output',
       'self_attn.q_norm': 'attn_q_norm', 'self_attn.k_norm': 'attn_k_norm', 'mlp.gate_proj': 'ffn_gate',
       'mlp.up_proj': 'ffn_up', 'mlp.down_proj': 'ffn_down'}
for l in range(L):
    for h, g in per.items(): names['model.layers.%d.%s.weight' % (l, h)] = 'blk.%d.%s.weight' % (l, g)
if not cfg.get('tie_word_embeddings'):
    if 'lm_head.weight' not in header:
        sys.exit('%s: tie_word_embeddings is false but %s has no lm_head.weight' % (cfg_path, st_path))
    names['lm_head.weight'] = 'output.weight'
missing = [n for n in names if n not in header]
if missing:
    sys.exit('%s: missing tensor(s) %s' % (st_path, ', '.join(missing[:5])))
unmapped = [n for n in header if n != '__metadata__' and n not in names and
            not (n == 'lm_head.weight' and cfg.get('tie_word_embeddings'))]
if unmapped:
    sys.exit('%s: tensor(s) this writer does not map: %s' % (st_path, ', '.join(unmapped[:5])))

infos = []; blobs = []; off = 0
def align(n, a=32): return (n + a - 1) // a * a
for hf, gg in names.items():
    m = header[hf]
    tpath = where[hf][0]
    if m['dtype'] != 'BF16':
        sys.exit('%s: tensor %s is %s, expected BF16' % (tpath, hf, m['dtype']))
    shape = m['shape']; b0, b1 = m['data_offsets']
    elems = 1
    for d in shape: elems *= d
    if b1 - b0 != 2 * elems:
        sys.exit('%s: tensor %s holds %d bytes, its shape %s needs %d' % (tpath, hf, b1 - b0, shape, 2 * elems))
    is_norm = len(shape) == 1
    nbytes = (b1 - b0) * (2 if is_norm else 1)  # 1-D norms widened to f32
    dims = list(reversed(shape))
    infos.append(s_str(gg) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims) +
                 struct.pack('<I', 0 if is_norm else 30) + struct.pack('<Q', off))
    blobs.append((hf, b0, b1, is_norm, off))
    off = align(off + nbytes)

tmp = dst + '.partial'
try:
    with open(tmp, 'xb') as o:
        o.write(b'GGUF' + struct.pack('<IQQ', 3, len(infos), len(kv)))
        for k in kv: o.write(k)
        for t in infos: o.write(t)
        o.write(b'\0' * (align(o.tell()) - o.tell()))
        base = o.tell()
        for hf, b0, b1, is_norm, toff in blobs:
            o.write(b'\0' * (base + toff - o.tell()))
            tpath, fh, data0 = where[hf]
            fh.seek(data0 + b0)
            raw = fh.read(b1 - b0)
            if len(raw) != b1 - b0:
                raise ValueError('%s: tensor %s is cut short (%d of %d bytes)' % (tpath, hf, len(raw), b1 - b0))
            if is_norm:
                raw = b''.join(struct.pack('<I', struct.unpack_from('<H', raw, i)[0] << 16) for i in range(0, len(raw), 2))
            o.write(raw)
    os.replace(tmp, dst)
except FileExistsError:
    sys.exit('%s exists (another conversion running, or left over): not overwritten' % tmp)
except BaseException as e:  # errors and Ctrl-C alike: no partial file is left behind
    if os.path.exists(tmp): os.remove(tmp)
    if isinstance(e, (OSError, ValueError)): sys.exit(str(e))
    raise
finally:
    for _, fh, _, _ in shards.values(): fh.close()
print('wrote', dst, len(infos), 'tensors,', len(kv), 'keys')
