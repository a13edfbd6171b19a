"""Everything `tokenizers` does after the model, in pure Python over numpy.

Data flow (one input): engine -> raw `Encoding` (ids, char offsets, words, model tokens)
-> `postprocess.post_process` (truncate -> post-processor -> pad) -> `Encoding`.
Decode: ids -> tokens (`decoders.decode_ids`) -> decoder chain -> str.
"""
