"""Qwen3's own chat template, rendered in Python, for a local count of what a Qwen server sends.

``washexp.tokens.render_chatml`` (the study's local Qwen count: ceilings, allowances and
``input_tokens``) writes a tool result as an ``<|im_start|>tool`` turn. Qwen3's template does
not: consecutive tool results become one user turn of ``<tool_response>`` blocks, a tool call
is ``<tool_call>`` JSON whose arguments string is inserted as is, and with thinking disabled the
generation prompt ends on an empty think block. This rendering follows the template shipped
with Qwen3 (``tokenizer_config.json``, no tools in the request, as washexp's contexts have none)
and is used where the count should be the one a Qwen server makes: H's "fewer input tokens than
Full" check when the endpoint offers no tokenize route.
"""

from __future__ import annotations

import json

from washexp.tokens import count


def _text(content) -> str:
    return content if isinstance(content, str) else ""


def _call(call: dict) -> str:
    fn = call.get("function", call)
    args = fn.get("arguments", "")
    args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return '<tool_call>\n{"name": "' + fn["name"] + '", "arguments": ' + args + "}\n</tool_call>"


def render(messages: list[dict], enable_thinking: bool | None = None) -> str:
    """``messages`` as Qwen3's chat template renders them, with the generation prompt."""
    out = []
    if messages and messages[0].get("role") == "system":
        out.append(f"<|im_start|>system\n{_text(messages[0].get('content'))}<|im_end|>\n")
    for i, m in enumerate(messages):
        role, content = m.get("role"), _text(m.get("content"))
        if role == "user" or (role == "system" and i > 0):
            out.append(f"<|im_start|>{role}\n{content}<|im_end|>\n")
        elif role == "assistant":
            # Reasoning is only rendered for turns after the last user query: none in a context
            # that ends on the follow-up.
            text = f"<|im_start|>assistant\n{content}"
            for k, call in enumerate(m.get("tool_calls") or []):
                text += ("\n" if k or content else "") + _call(call)
            out.append(text + "<|im_end|>\n")
        elif role == "tool":
            first = i == 0 or messages[i - 1].get("role") != "tool"
            last = i == len(messages) - 1 or messages[i + 1].get("role") != "tool"
            out.append(
                ("<|im_start|>user" if first else "")
                + f"\n<tool_response>\n{content}\n</tool_response>"
                + ("<|im_end|>\n" if last else "")
            )
    out.append("<|im_start|>assistant\n")
    if enable_thinking is False:
        out.append("<think>\n\n</think>\n\n")
    return "".join(out)


def count_messages(messages: list[dict], enable_thinking: bool | None = None) -> int:
    """Qwen tokens of ``messages`` as Qwen3's chat template renders them."""
    return count(render(messages, enable_thinking))
