// Together AI post-training (RL) infrastructure: model resources (GPUs with a frozen base model, billed while READY) and the training sessions on them.
package togetherrl
