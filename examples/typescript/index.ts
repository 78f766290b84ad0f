// One LoRA model resource and two training sessions on it (LoRA ranks 8 and 16), with the price the API
// estimates for the resource before it is created.
import * as togetherRl from "@pulumi-together-rl/sdk";

const baseModel = "Qwen/Qwen3.5-4B";
const computeConfig = { numGeneratorReplicas: 1 };

const gpu = new togetherRl.ModelResource("gpu", { baseModel, computeConfig });

const rank8 = new togetherRl.TrainingSession("rank8", {
    modelResourcesId: gpu.id,
    loraConfig: { rank: 8 },
});
const rank16 = new togetherRl.TrainingSession("rank16", {
    modelResourcesId: gpu.id,
    loraConfig: { rank: 16 },
});

const estimate = togetherRl.estimateCost({ baseModel, computeConfig });

export const modelResourceId = gpu.id;
export const sessionIds = [rank8.id, rank16.id];
export const estimatedPricePerHour = estimate.then((e) => e.pricePerHour);
export const currency = estimate.then((e) => e.currency);
