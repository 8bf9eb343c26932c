#!/usr/bin/python3
"""A stand-in vocabulary for llama.cpp's llama2.c converter, whose models here (stories260K, the
random stories110M-shaped benchmark model) come without llama2.c's tokenizer.bin:

    tools/stand_in_vocab.py OUT SIZE

writes SIZE tokens in llama2.c's tokenizer.bin format: int32 max_token_length, then per token
float32 score, int32 length, bytes. The converter renames ids 0-2 "<unk>", "<s>", "</s>" (their
types unknown and control), types "<0xXX>" byte tokens and escapes spaces as U+2581; llama.cpp's
SPM vocabulary needs the byte tokens (it looks up "<0x0A>" for newline). The rest are " w<id>".
"""
import struct
import sys

out, size = sys.argv[1], int(sys.argv[2])
tokens = [b"<unk>", b"\n<s>\n", b"\n</s>\n"] + [b"<0x%02X>" % b for b in range(256)]
tokens += [b" w%d" % i for i in range(len(tokens), size)]
with open(out, "wb") as f:
    f.write(struct.pack("<i", 8))
    for t in tokens:
        f.write(struct.pack("<fi", -1.0, len(t)) + t)
