"""The input module of a sentence-transformers export whose pooling needs more than the plain pass (layer 5).

sentence-transformers' ``Transformer`` module tokenises the plain sentence and hands on the
token states (and every layer's, with ``output_hidden_states``). Two poolings need more:

* a prompt pooling (``prompt``, ``prompt-denoised``) reads the sentence inside its template:
  :class:`IsotropyTransformer` tokenises it exactly as :class:`isotropy.encoders.Encoder`
  does (:meth:`~isotropy.encoders.poolings.prompt.PromptLayout.wrap`: the template's ids
  around the sentence cut to fit ``max_seq_length``);
* ``ditto`` reads one head's attention weights: the module runs the model on the eager
  attention path and hands on its ``attentions``.

It is the stock ``Transformer`` otherwise (same saving, loading and model files), with two
more entries in ``sentence_bert_config.json``: ``isotropy_template`` and ``isotropy_attentions``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["input_class"]


def input_class(Transformer: type, torch: Any) -> type:
    from ..encoders.batching import pad_batch
    from ..encoders.poolings.prompt import check_template, prompt_layout

    class IsotropyTransformer(Transformer):
        """sentence-transformers' ``Transformer`` that can wrap sentences in a prompt template and return attentions."""

        config_keys = [*Transformer.config_keys, "isotropy_template", "isotropy_attentions"]

        def __init__(
            self, model_name_or_path: str, *, isotropy_template: str | None = None, isotropy_attentions: bool = False, **kwargs
        ):
            super().__init__(model_name_or_path, **kwargs)
            self.isotropy_template = None if isotropy_template is None else check_template(isotropy_template, "prompt")
            self.isotropy_attentions = bool(isotropy_attentions)
            self._layout = None
            if self.isotropy_attentions:
                self.model.set_attn_implementation("eager")  # attention weights exist on the eager path only

        def preprocess(self, inputs, prompt: str | None = None, **kwargs) -> dict[str, Any]:
            if self.isotropy_template is None or prompt or not all(isinstance(x, str) for x in inputs):
                return super().preprocess(inputs, prompt=prompt, **kwargs)
            if self._layout is None:
                self._layout = prompt_layout(self.tokenizer, self.isotropy_template, "this model", "prompt")
            ids, types = self._layout.wrap(self.tokenizer, list(inputs), self.max_seq_length)
            feeds = pad_batch(ids, types, range(len(ids)), self.tokenizer.pad_token_id or 0)
            features: dict[str, Any] = {k: torch.from_numpy(v) for k, v in feeds.items()}
            features["modality"] = "text"
            return features

        def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
            if not self.isotropy_attentions:
                return super().forward(features, **kwargs)
            # The stock forward calls model.forward and keeps only the token states (and every layer's):
            # the text path is run here so the attention weights are handed on too.
            names = ("input_ids", "attention_mask", "token_type_ids")
            inputs = {k: features[k] for k in names if k in features}
            hidden = bool(getattr(self.model.config, "output_hidden_states", False))
            out = self.model(**inputs, output_hidden_states=hidden, output_attentions=True, return_dict=True)
            features["token_embeddings"] = out.last_hidden_state
            if hidden:
                features["all_layer_embeddings"] = out.hidden_states
            features["attentions"] = out.attentions
            return features

    return IsotropyTransformer
