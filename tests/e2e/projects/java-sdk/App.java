// A Java program of a user of sdk/java: tests/e2e/test_generated_sdks.py compiles it with the SDK's sources
// against com.pulumi:pulumi from Maven Central. Compiled, not run: there is no Java language host here.
package app;

import com.pulumi.Pulumi;
import com.pulumi.core.Output;
import io.github.pulumitogetherrl.togetherrl.ModelResource;
import io.github.pulumitogetherrl.togetherrl.ModelResourceArgs;
import io.github.pulumitogetherrl.togetherrl.TogetherrlFunctions;
import io.github.pulumitogetherrl.togetherrl.TrainingSession;
import io.github.pulumitogetherrl.togetherrl.TrainingSessionArgs;
import io.github.pulumitogetherrl.togetherrl.inputs.ComputeConfigArgs;
import io.github.pulumitogetherrl.togetherrl.inputs.EstimateCostArgs;
import io.github.pulumitogetherrl.togetherrl.inputs.LoraConfigArgs;

public final class App {
    public static void main(String[] args) {
        Pulumi.run(ctx -> {
            var gpu = new ModelResource("gpu", ModelResourceArgs.builder()
                .baseModel("Qwen/Qwen3.5-4B")
                .computeConfig(ComputeConfigArgs.builder().numGeneratorReplicas(1).build())
                .build());
            var session = new TrainingSession("rank8", TrainingSessionArgs.builder()
                .modelResourcesId(gpu.id())
                .loraConfig(LoraConfigArgs.builder().rank(8).build())
                .build());
            Output<Double> price = TogetherrlFunctions.estimateCost(
                EstimateCostArgs.builder().baseModel("Qwen/Qwen3.5-4B").build()).applyValue(r -> r.pricePerHour());
            ctx.export("sessionId", session.id());
            ctx.export("pricePerHour", price);
        });
    }
}
