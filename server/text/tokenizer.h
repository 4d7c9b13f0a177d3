// Byte-level BPE tokenizer (GPT-2 / Llama 3 / SmolLM / Qwen2 style). Work in progress.
#pragma once

namespace flashserve::text {}
