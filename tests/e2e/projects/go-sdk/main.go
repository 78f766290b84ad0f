// A Go program of a user of sdk/go, run under Pulumi's mocks: it prints what the SDK sends the engine, one line
// per resource or call (tests/e2e/test_generated_sdks.py builds, vets and runs it).
package main

import (
	"fmt"
	"os"
	"sort"

	"github.com/pulumi-together-rl/pulumi-together-rl/sdk/go/togetherrl"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

type mocks struct{ sent []string }

func (m *mocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	m.sent = append(m.sent, fmt.Sprintf("%s %v", args.TypeToken, args.Inputs.Mappable()))
	return args.Name + "-id", args.Inputs, nil
}

func (m *mocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	m.sent = append(m.sent, fmt.Sprintf("%s %v", args.Token, args.Args.Mappable()))
	return resource.NewPropertyMapFromMap(map[string]interface{}{"pricePerHour": 2.5, "currency": "USD"}), nil
}

func main() {
	m := &mocks{}
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		gpu, err := togetherrl.NewModelResource(ctx, "gpu", &togetherrl.ModelResourceArgs{
			BaseModel:     pulumi.String("Qwen/Qwen3.5-4B"),
			ComputeConfig: togetherrl.ComputeConfigArgs{NumGeneratorReplicas: pulumi.Int(1)},
		})
		if err != nil {
			return err
		}
		_, err = togetherrl.NewTrainingSession(ctx, "rank8", &togetherrl.TrainingSessionArgs{
			ModelResourcesId: gpu.ID(),
			LoraConfig:       togetherrl.LoraConfigArgs{Rank: pulumi.Int(8)},
		})
		if err != nil {
			return err
		}
		price, err := togetherrl.EstimateCost(ctx, &togetherrl.EstimateCostArgs{BaseModel: "Qwen/Qwen3.5-4B"})
		if err != nil {
			return err
		}
		if price.PricePerHour != 2.5 {
			return fmt.Errorf("pricePerHour %v", price.PricePerHour)
		}
		return nil
	}, pulumi.WithMocks("project", "stack", m))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sort.Strings(m.sent)
	for _, line := range m.sent {
		fmt.Println(line)
	}
}
