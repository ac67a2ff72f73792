package dataset

import "strings"

// The built-in taxonomy of the synthetic world: real ad interests with real
// words, so that a demo's interest labels read as what they are. Each coarse
// interest has up to eight mid interests and eight facets; a fine interest
// is a facet of a mid interest ("trail" of "running"). A world asks for
// Coarse, Mid and Fine interests; the first coarse interests are taken in
// order, and within each the first mid interests and facets its share
// allows. Interests beyond the table get made-up words.
//
// Each line is "name: words". Every word is distinct from every other word
// of the taxonomy, the noise words and the brands, also after stemming
// (TestTaxonomyWordsDistinct), so an interest's words name it alone.

// taxCoarse is one coarse interest: its name and words, its mid interests
// and its facets.
type taxCoarse struct {
	name   string
	words  []string
	mids   []taxMid
	facets []taxMid // the facets: a name and words, as a mid interest
}

// taxMid is one mid interest: its name and words.
type taxMid struct {
	name  string
	words []string
}

// taxonomy is parsed from taxonomyText at start-up.
var taxonomy = parseTaxonomy(taxonomyText)

// taxonomyText: a coarse interest's line starts at the margin, its mid
// interests are indented with "- ", its facets with "* ".
const taxonomyText = `
sports: sports athletic fitness workout gym exercise
- running: running runner marathon jogging sprint pace
- cycling: cycling bike bicycle saddle pedal peloton
- football: football soccer cleats goalkeeper striker pitch
- tennis: tennis racket court volley topspin wimbledon
- swimming: swimming swimsuit goggles pool laps breaststroke
- yoga: yoga mat pilates stretching meditation asana
- hiking: hiking trailhead summit trekking compass daypack
- basketball: basketball hoop dunk rebound dribble jersey
* trail: trail outdoor rugged
* junior: junior youth teen
* womens: womens ladies feminine
* pro: pro elite performance
* value: value affordable entryprice
* lightweight: lightweight breathable airy
* waterproof: waterproof allweather durable
* indoor: indoor treadmill homegym
food: food drink tasty recipe kitchen flavor
- coffee: coffee espresso latte roast barista beans
- tea: tea matcha herbal chai teapot oolong
- wine: wine vineyard merlot cabernet sommelier chardonnay
- beer: beer brewery ale lager hops pint
- baking: baking bread pastry flour oven sourdough
- snacks: snacks chips crackers popcorn pretzels nuts
- chocolate: chocolate cocoa truffle praline candy fudge
- grocery: grocery pantry cereal pasta rice sauce
* organic: organic farmfresh pesticidefree
* vegan: vegan dairyfree meatless
* glutenfree: glutenfree lowcarb keto
* gourmet: gourmet artisan handcrafted
* bulk: bulk multipack wholesale
* spicy: spicy bold zesty
* sugarfree: sugarfree diet lowcalorie
* festive: festive seasonal christmas
travel: travel trip vacation getaway journey tourism
- flights: flights airline airfare airport boarding nonstop
- hotels: hotels resort suite booking checkin concierge
- cruises: cruises ship cabin onboard voyage liner
- camping: camping tent campsite sleepingbag lantern campfire
- city breaks: citybreak sightseeing museum downtown landmarks tours
- beach: beach seaside surf snorkel island tropical
- ski: ski snowboard slopes chalet gondola piste
- rail journeys: rail railway sleepertrain scenic interrail locomotive
* luxury: luxury fivestar exclusive
* family: kidsclub allinclusive familyfriendly
* lastminute: lastminute cheap discounted
* romantic: romantic couples honeymoon
* adventure: adventure backcountry wild
* shortbreak: shortbreak overnight minibreak
* solo: solo hostel nomad
* accessible: accessible easy relaxed
mobile games: games mobile play player levels appstore
- puzzle: puzzle match3 crossword sudoku brainteaser riddles
- strategy: strategy empire conquer tactics kingdom war
- racing games: racing drift speed turbo circuit laptime
- rpg: rpg quest hero dungeon dragon loot
- casual: casual idle tap merge arcade chill
- card games: cards poker solitaire blackjack casino shuffle
- shooter: shooter battle royale sniper squad arena
- word games: words spelling scrabble anagram letters wordle
* freetoplay: freetoplay download installnow
* multiplayer: multiplayer coop pvp
* offline: offline singleplayer story
* cartoon: cartoon toddler preschool
* ranked: hardcore ranked esports
* pixel: pixel classic oldschool
* launch: launch update newseason
* coins: coins gems bonus
fashion: fashion style clothing apparel wardrobe outfit
- dresses: dresses gown cocktail maxi floral sundress
- denim: denim jeans jacket indigo skinny bootcut
- sneakers: sneakers trainers kicks lowtop hightop streetwear
- handbags: handbags purse tote clutch leather crossbody
- watches: watches chronograph wristwatch dial strap timepiece
- jewelry: jewelry necklace earrings ring bracelet pendant
- outerwear: outerwear coat parka puffer raincoat blazer
- eyewear: eyewear sunglasses glasses frames aviator polarized
* summer: summer linen sleeveless
* winter: winter wool knit
* designer: designer couture runway
* vintage: vintage thrift secondhand
* menswear: menswear gentlemen tailored
* plus: plus curvy extended
* sustainable: sustainable recycled ethical
* clearance: clearance outlet markdown
electronics: electronics tech gadget device digital smart
- smartphones: smartphone phone android iphone unlocked dualsim
- laptops: laptop notebook ultrabook keyboard processor ssd
- headphones: headphones earbuds wireless noisecancelling headset audio
- cameras: camera mirrorless lens dslr photography zoom
- tv: television tv 4k oled soundbar streaming
- smart home: smarthome thermostat doorbell voiceassistant smartplug hub
- wearables: smartwatch fitnesstracker wearable heartrate pedometer band
- gaming consoles: console controller gamepad joystick handheld playstation
* refurbished: refurbished renewed openbox
* flagship: flagship latest newest
* entrylevel: entrylevel lowcost nofrills
* portable: portable travelsize mini
* bundle: bundle kit combo
* bluetooth: bluetooth cordless rechargeable
* gamer: gamer rgb overclocked
* business: business office productivity
home: home house interior decor household homeware
- furniture: furniture sofa couch armchair bookshelf dresser
- bedding: bedding mattress pillow duvet sheets blanket
- kitchenware: cookware pans knives blender cutlery kettle
- garden: garden plants seeds lawn patio greenhouse
- lighting: lighting lamp chandelier bulbs led sconce
- cleaning: cleaning vacuum mop detergent cleaner broom
- diy tools: tools drill hammer screwdriver toolkit workshop
- bath: bathroom towels shower bathtub faucet vanity
* modern: modern minimalist scandinavian
* rustic: rustic farmhouse cottage
* smallspace: smallspace apartment compact
* ecofriendly: ecofriendly bamboo nontoxic
* luxe: luxe velvet marble
* alfresco: alfresco weatherresistant terrace
* nursery: nursery playroom childsafe
* connected: connected automated wifi
beauty: beauty cosmetics makeup skincare glow selfcare
- skin care: serum moisturizer cleanser toner retinol hyaluronic
- color cosmetics: lipstick mascara foundation eyeshadow blush concealer
- hair care: shampoo conditioner haircare hairdryer curls salon
- fragrance: perfume fragrance cologne scent eaudeparfum musk
- nails: nails manicure polish gel nailart pedicure
- shaving: razor shaving beard trimmer aftershave grooming
- sun care: sunscreen spf tanning aftersun bronzer uv
- wellness: vitamins supplements collagen probiotics wellness sleepaid
* sensitive: sensitive hypoallergenic fragrancefree
* antiaging: antiaging wrinkle firming
* botanical: botanical herbalextract plantpowered
* crueltyfree: crueltyfree refillable zerowaste
* professional: professional salongrade clinical
* giftset: giftset sampler discovery
* dewy: dewy radiant luminous
* matte: matte oilcontrol poreless
finance: finance money banking savings credit invest
- credit cards: creditcard cashback balancetransfer points annualfee creditlimit
- mortgages: mortgage homeloan refinance downpayment fixedrate lender
- investing: stocks etf portfolio brokerage dividends trading
- insurance: insurance policy coverage claims underwriting actuary
- crypto: crypto bitcoin wallet blockchain ethereum altcoin
- budgeting: budgeting expenses bills paycheck spending ledger
- loans: loans personalloan lending borrow installment payday
- tax: tax filing refund accountant deductions taxreturn
* nofee: nofee zerofee freeaccount
* students: students graduates firsttime
* smallbusiness: smallbusiness entrepreneurs freelancers
* retirement: retirement pension annuity
* instant: instant fastapproval sameday
* secure: secure fdic protected
* highyield: highyield bestrate apy
* digital: digitalbank mobileapp paperless
automotive: car auto vehicle driving motor automotive
- new cars: sedan suv hatchback dealership testdrive lease
- electric vehicles: electric ev charging battery range chargingstation
- tires: tires wheels alloy tread allseason winterwheels
- car care: carwash wax detailing ceramic microfiber
- parts: parts brakes sparkplugs oilchange engine gasket
- motorcycles: motorcycle motorbike scooter throttle chopper
- car rental: carrental rentals pickup dropoff oneway mileage
- navigation: dashcam gps navigation carplay dashboard satnav
* hybrid: hybrid fuelefficient economical
* sevenseat: sevenseat spacious minivan
* sporty: sporty coupe turbocharged
* certified: certified preowned inspected
* offroad: offroad 4x4 allterrain
* executive: executive prestige chauffeur
* urban: urban city parking
* commuter: commuter daily reliable
education: learning education course study online class
- languages: language spanish french fluency grammar conversation
- coding: coding programming python javascript bootcamp developer
- test prep: sat gmat exam testprep tutoring practice
- degrees: degree university college masters bachelor campus
- music lessons: guitar piano lessons music violin drums
- early learning: phonics math reading homework kindergarten abc
- professional skills: certification leadership management excel upskill mba
- art classes: drawing painting sketch watercolor illustration easel
* beginner: beginner intro fundamentals
* advanced: advanced expert masterclass
* accredited: accredited diploma credential
* selfpaced: selfpaced ondemand recorded
* live: live instructorled cohort
* scholarship: scholarship financialaid grants
* parttime: parttime evening flexible
* afterschool: afterschool homeschool tweens
pets: pets animal companion petcare furry petowners
- dog food: dogfood kibble puppy treats chew dog
- cat supplies: cat kitten litter scratcher catnip feline
- aquariums: aquarium fish tank reef goldfish coral
- pet toys: toys fetch squeaky plush rope frisbee
- pet grooming: petgrooming deshedding clippers fur coatcare brushing
- vet care: vet veterinary vaccines fleas ticks checkup
- birds: bird parrot birdseed cage budgie feeder
- pet beds: petbed crate kennel carrier playpen cushion
* grainfree: grainfree highprotein rawfood
* senior: senior aging arthritis
* newborn: newborn babyanimals weaning
* largebreed: largebreed giant bigdog
* smallbreed: smallbreed toybreed tiny
* holistic: holistic naturalremedy calming
* interactive: interactive enrichment puzzlefeeder
* autoship: autoship subscription monthly
`

// noiseVocab are generic advertising words, shared by every interest.
var noiseVocab = strings.Fields(`new now shop buy best top great official store deals offer today quality
guaranteed trusted fast delivery returns order popular favorite choice perfect ultimate original
authentic collection edition series discover explore enjoy love everyday simple better upgrade limited free
sale gift special choose trendy musthave bestseller premium reviews rated selection catalog brandnew
instock ready easyreturns checkout hot`)

// brandHeads and brandTails make the brand names: Northwave, Bluecraft, ...
var (
	brandHeads = strings.Fields(`North Blue Swift Bright Silver Green Red Iron Golden Sun Stone River Maple Eagle
Fox Nova Ocean Cedar Star Cloud Pine Wildrose Lumen Harbor Vertex Aurora Falcon Orchid Cobalt Amber`)
	brandTails = strings.Fields(`wave forge works labs field craft point wood gate bay ridge vale mark ware well
path light line crest haven`)
)

// regionNames are the users' regions.
var regionNames = strings.Fields(`North South East West Central Coastal Highlands Lakeside Metro Valley Riverside Plains`)

// parseTaxonomy parses taxonomyText; a malformed line panics (the text is
// a constant of this file).
func parseTaxonomy(text string) []taxCoarse {
	var out []taxCoarse
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		kind := byte(0)
		if line[0] == '-' || line[0] == '*' {
			kind, line = line[0], strings.TrimSpace(line[1:])
		}
		name, words, ok := strings.Cut(line, ":")
		if !ok || len(strings.Fields(words)) < 3 {
			panic("dataset: bad taxonomy line " + line)
		}
		ws := strings.Fields(words)
		switch kind {
		case 0:
			out = append(out, taxCoarse{name: name, words: ws})
		case '-':
			c := &out[len(out)-1]
			c.mids = append(c.mids, taxMid{name: name, words: ws})
		case '*':
			c := &out[len(out)-1]
			c.facets = append(c.facets, taxMid{name: name, words: ws})
		}
	}
	return out
}
