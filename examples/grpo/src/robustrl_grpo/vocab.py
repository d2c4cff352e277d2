"""The job's tokenizer, made locally with the ``tokenizers`` package (nothing from a hub).

One token per character of the task's alphabet plus the special tokens, so a digit is always one id
and the reward can be read from ids or text alike. Saved as a ``PreTrainedTokenizerFast`` folder
(``tokenizer.json`` + ``tokenizer_config.json``), which transformers and vLLM both load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict

__all__ = ["ALPHABET", "SPECIALS", "EOS", "BOS", "PAD", "build_tokenizer", "save_tokenizer"]

BOS = "<|bos|>"
EOS = "<|endoftext|>"
PAD = "<|pad|>"
SPECIALS = [PAD, BOS, EOS]
# Digits first so that their ids are stable across alphabet changes at the end.
ALPHABET = "0123456789+-*=?: abcdefghijklmnopqrstuvwxyz"


def vocabulary() -> Dict[str, int]:
    vocab: Dict[str, int] = {}
    for token in SPECIALS + list(ALPHABET):
        vocab[token] = len(vocab)
    return vocab


def build_tokenizer():  # -> transformers.PreTrainedTokenizerFast
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel(vocab=vocabulary(), unk_token="?"))
    # Every character is its own word; Fuse joins them back without separators.
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.add_special_tokens(SPECIALS)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token="?",
        clean_up_tokenization_spaces=False,
    )


def save_tokenizer(directory: Path) -> None:
    build_tokenizer().save_pretrained(str(directory))
