package redact

import (
	"strings"
	"unicode/utf8"
)

// englishWords is the dictionary synthetic text draws from: common English
// words, written out by hand, bucketed by length at start-up. Common words
// tokenize like the text they replace (one or two BPE tokens each), which is
// what keeps the token count of redacted prompts close to the original.
const englishWords = `
a i
an as at be by do go he if in is it me my no of on or so to up us we am ok
all and any are ask bad big box boy but buy can car cut day did die dog eat end
eye far few for fun get got gun had has her him his hot how job key kid law let
lie lot low man map may men mix new not now odd off old one our out own pay per
put ran red run sad saw say sea see set she sit six sky son sun ten the tie too
top try two use via war was way who why win yes yet you age air arm art bed bit
cup dry due egg fit fix fly gas hit ice ill joy lab lay leg lip log mad mom net
oil pen pet pie pot raw row rub sat sex shy sir tax tea toe toy van wet
able also area away baby back ball bank base bear beat been best bill bird
blue boat body book born both call came camp card care case cash cell city
club cold come cost crew dark data date dead deal dear deep door down draw
drop drug each east easy else even ever face fact fail fair fall farm fast
fear feel feet file fill film find fine fire firm fish five food foot form
four free from full fund game gave girl give goal goes gold gone good grow
hair half hall hand hang hard have head hear heat held help here high hill
hold home hope hour huge idea into item join just keep kept kind king knew
know lack land last late lead left less life like line list live long look
lose loss lost love made main make many mark mass meet mind miss more most
move much must name near need news next nice none note once only open over
page paid pain part pass past plan play poor pull push race rate read real
rest rich ride rise risk road rock role room rule safe said sale same save
seat seek seem seen self sell send ship shot show side sign sing site size
skin slow soft sold some song soon sort star stay step stop such sure take
talk task team tell term test than that them then they thin this thus time
told tone took tree trip true turn type unit upon used user very view vote
wait walk wall want warm wash wave week well went were west what when whom
wide wife will wind wine wish with wood word work yard yeah year your zero
about above admit adult after again agent agree ahead allow alone along
among apply argue avoid award aware basic beach begin being below birth
black blood board brain bread break bring broad brown build built buyer
carry catch cause chain chair check chest chief child civil claim class
clean clear climb clock close coach coast could count court cover crime
cross crowd daily dance death depth doubt dozen draft drama dream dress
drink drive early earth eight empty enemy enjoy enter entry equal error
event every exact exist extra faith field fifty fight final first floor
focus force frame front fruit funny glass grant great green group guess
guest guide happy heart heavy horse hotel house human image index inner
input issue judge known labor large later laugh layer learn least leave
legal level light limit local logic lower lucky lunch major maker march
match maybe mayor meant media metal might minor model money month moral
mouth movie music never night noise north novel nurse occur ocean offer
often order other owner paint panel paper party peace phase phone photo
piece pilot place plant plate point power press price pride prime print
prior proof proud prove queen quick quiet quite radio raise range rapid
ratio reach ready refer right river rough round route royal rural scene
scope score sense serve seven shall shape share sharp sheet shift shirt
shock shoot short sight since skill sleep small smart smile smoke solid
solve sorry sound south space speak speed spend split sport staff stage
stand start state steel stick still stock stone store storm story study
stuff style sugar sweet table taken taste teach thank theme there these
thick thing think third those three throw tight title today total touch
tough tower track trade train treat trend trial truck truly trust truth
twice under union until upper urban usual value video visit voice waste
watch water wheel where which while white whole whose woman women world
worry would write wrong young youth
accept access across action active actor actual advice affect afford
agency agenda almost always amount animal annual answer anyone appear
around arrive artist aspect assume attack attend author avoid battle
beauty become before behind belief better beyond bottom branch breath
bridge bright budget burden button camera cancer career center chance
change charge choice choose church circle client closer coffee column
combat coming common corner cotton county couple course create credit
crisis critic custom damage danger dealer debate decade decide defeat
defend define degree demand depend design desire detail device differ
dinner direct doctor dollar double driver during easily eating editor
effect effort either eleven emerge empire employ enable ending energy
engage engine enough ensure entire escape estate ethnic except expect
expert export extend extent fabric factor family famous father fellow
female figure finger finish flight flower follow forest forget formal
former fourth friend future garden gender global ground growth guilty
handle happen hardly health heaven height highly honest impact income
indeed inside intend invest island itself junior killer labour latter
launch lawyer leader league length lesson letter likely listen little
living losing manage manner market master matter medium member memory
mental merely method middle minute mirror mobile modern moment mother
motion murder museum mutual myself narrow nation native nature nearby
nearly nobody normal notice number object obtain office online option
orange origin output parent partly people period permit person phrase
planet player please plenty pocket police policy prefer pretty prince
prison profit proper public pursue quarter rarely rather reader really
reason recall recent record reduce reform refuse regard region relate
relief remain remote remove repeat report rescue resist resort result
retain retire return reveal review rights safety salary sample saving
scheme school screen search season second secret sector secure select
senior series settle severe should signal silver simple simply single
sister slight smooth social source speech spirit spread spring square
stable status steady strain stream street stress strike string strong
studio submit sudden suffer summer supply surely survey switch symbol
system talent target temple tenant tennis theory thirty though threat
ticket timber tissue toward travel treaty tunnel twelve unique unless
unlike update useful valley vendor versus victim vision visual volume
wealth weapon weekly weight wonder worker writer yellow
ability absence academy account achieve acquire address advance adviser
against airline airport alcohol already amazing analyst ancient another
anxiety anybody anymore anyway article assault attempt attract average
balance barrier battery because bedroom benefit between billion brother
cabinet capable capital captain careful carrier catalog central century
certain chamber channel chapter charity chicken citizen classic climate
clothes collect college combine comfort command comment company compare
compete complex concept concern conduct confirm connect consist contact
contain content contest context control convert correct council counter
country courage cousin culture current dealing decline default defense
deficit deliver density deposit descend despite develop digital discuss
disease display distant diverse divorce economy edition educate element
embrace emotion engaged enhance episode examine example excited execute
exhibit expense explain explore express extreme factory faculty failure
fashion feature federal feeling fiction fifteen finding fishing fitness
foreign forever formula fortune forward freedom funding gallery general
genetic gesture greatly growing habitat healthy hearing heavily helpful
herself highway himself history holiday housing however hundred husband
illegal illness imagine initial inquiry insight install instead intense
interim involve journal journey justice justify kitchen landing largely
lawsuit leading learned leather liberal library license lifting limited
machine manager married massive maximum meaning measure medical meeting
mention message million mineral minimum missing mission mistake mixture
monitor monthly morning musical mystery natural neither nervous network
nothing nuclear numeral observe obvious offense officer opening operate
opinion organic outcome outside overall package painful partner passage
patient pattern payment penalty pension percent perfect perform perhaps
picture plastic pleased popular portion poverty precise predict premium
prepare present prevent primary printer privacy private problem proceed
process produce product profile program project promise promote protect
protein protest provide publish purpose qualify quality quarter quickly
radical railway readily reality realize receipt receive recover reflect
regular related release remains removal replace request require reserve
resolve respect respond restore retired revenue reverse routine running
science scratch section segment serious servant service session setting
seventy several shelter shortly silence similar sitting smoking society
soldier somehow someone speaker special sponsor station storage strange
stretch student subject succeed success suggest summary support suppose
surface surgery survive suspect sustain teacher tension theater therapy
thereby thought through tonight totally tourist towards traffic trouble
typical unknown unusual upgrade utility variety various vehicle venture
version veteran victory village violent virtual visible visitor waiting
walking wealthy weather website wedding weekend welcome welfare western
whereas whether willing winning without witness working writing written
absolute abstract academic accepted accident accuracy accurate achieved
activity actually addition adequate adjacent advanced advocate aircraft
alliance although analysis announce anything anywhere apparent approach
approval argument artistic assembly assuming athletic attorney audience
authority baseball bathroom becoming behavior birthday boundary building
business campaign capacity category champion chemical children chairman
circuit civilian clinical clothing collapse columnist commerce complain
complete composer computer concrete conflict consider constant consumer
continue contract contrary convince corridor coverage creation creative
credible criminal critical crossing cultural currency customer database
daughter deadline decision decrease definite delivery democrat describe
designer detailed diabetes dialogue diameter directly director disaster
discount discover disorder distance district dividend domestic dominant
document donation downtown dramatic duration dynamics earnings economic
educator election electric elephant elevator emphasis employee employer
encounter engineer enormous entirely entrance envelope equality equation
estimate evaluate evidence exchange exciting exercise existing expected
expected explicit exposure extended external facility familiar favorite
festival finally financial football forecast formerly fraction frequent
friendly frontier function generate generous graduate guidance hardware
headline heritage historic homeless horrible hospital identify identity
incident increase indicate indirect industry infinite informal innocent
instance integral intended interest interior internal internet interval
invasion investor involved judgment keyboard language learning lifetime
likewise limiting literary location magazine maintain majority marriage
material medicine meantime membership midnight military minister minority
mobility moderate modified momentum mortgage mountain movement multiple
national negative normally notebook numerous observer obtained occasion
official operator opponent opposite optional ordinary organize original
outdoors overcome overseas painting parallel parental particle passenger
patience peaceful perceive personal persuade physical planning platform
pleasure politics portrait position positive possible powerful practice
preserve pressure previous priority prisoner probably producer profound
progress property proposal prospect protocol provider province publicly
purchase quantity question rational reaction received recently recovery
regional register relation relative relevant reliable religion remember
reporter republic research resident resource response restrict retailer
revision rhetoric sanction scenario schedule scrutiny security selected
semester sentence sequence severely shooting shopping shortage shoulder
slightly software solution somebody somewhat southern specific spectrum
spending standard stranger strategy strength striking strongly struggle
stunning suburban suddenly suitable summit superior supplier surprise
survival survivor sweeping symbolic sympathy syndrome teaching teenager
telephone template terminal terrible thinking thousand together tomorrow
training transfer treasure tropical truly ultimate uncovered universe
unlikely validity variable vertical violence volatile volunteer warrior
weakness whatever whenever wherever wireless withdraw workshop yourself
according activist actually addition aggregate agreement allowance
alongside ambitious amendment anonymous apartment apologize appealing
applicant architect arrangement assistant associate attention attribute
authority automatic available awareness basically beautiful beginning
boyfriend breakfast brilliant calculate candidate celebrate certainly
chocolate cigarette classroom coalition cognitive colleague commander
committee community complaint component conscious consensus constant
construct container continent corporate correctly counselor criticism
criticize currently dangerous deadlines defensive delivered democracy
dependent depressed desperate determine developer different difficult
dimension direction disappear discourse discovery education effective
efficient elsewhere emergency emotional emphasize encounter encourage
equipment essential establish everybody evolution exception excessive
executive existence expansion expensive expertise explosion extension
extensive extremely fantastic following formation framework frequency
furniture generally gentleman geography guarantee happiness headphone
highlight historian household hurricane hypothesis identical immediate
immigrant implement important impressed incentive including income
increased indicator industrial infection inflation influence initially
initiative insurance intention interpret interview introduce invention
inventory investing invisible involving judgement knowledge landscape
naturally necessary negotiate neighbour newspaper nightmare objective
obviously offensive operation ourselves outstanding ownership paragraph
passenger perfectly performer permanent personnel pollution potential
practical precisely pregnancy president primarily principal principle
privilege procedure professor programme prominent promotion
proportion prosecutor protection provision psychology publisher
recommend recording recovery reduction reference regarding registration
regularly reinforce relevance religious remaining represent reputation
requirement resistance resolution respective restaurant retirement
revolution satellite scientist secondary secretary selection sensitive
separate sequence seriously signature similarly situation something
sometimes somewhere specialist specifically spiritual statement
strategic structure substance suffering sufficient suggested
supporting surprised surrounding suspicion technical technique
temporary terrorist therefore thousands threshold tradition
transform transition treatment tremendous typically understand
universal variation vegetable violation virtually vulnerable
wonderful yesterday
absolutely accomplish accounting accurately acceptable accessible
additional adjustment adolescent advertising afterwards aggressive
apparently appearance assessment assistance associated atmosphere
attractive authorized background basketball boundaries bureaucracy
calculated candidates capability categories collection commercial
commission commitment comparison competitor complexity compliance
concerning conclusion conference confidence connection consistent
constantly constraint consultant contribute convention conviction
coordinate corruption creativity definitely democratic department
depression developing difference difficulty dimensional disability
discipline discussion distribute documented efficiency electronic
elementary employment engagement enterprise equivalent especially
essentially evaluation eventually everything everywhere evolution
exceptional excitement exhibition experience experiment explicitly
expression fortunately foundation frequently friendship functional
generation government graduation guidelines historical hypothesis
illustrate imagination impossible impression improvement incredible
increasing indication individual industrial inevitable initiative
innovation inspection instrument insurance integrated intellectual
interested interstate investment involvement journalist laboratory
leadership legitimate limitation literature management meaningful
membership mechanical motivation negotiation nevertheless newsletter
obligation occasional occupation opposition ordinarily organizing
originally particular percentage perception permission personally
phenomenon philosophy physically politician population possession
possibility previously production profession proportion protection
publishing reasonable reasonably recognized regulation relatively
remarkable repeatedly reputation resistance researcher resolution
restaurant retirement revolution scientific settlement specialist
statistics strengthen structural subsequent successful sufficient
suggestion supervisor surprising sustainable technology television
temperature themselves throughout tournament tremendous ultimately
understand university unfortunate vegetables widespread workforce
accommodate achievement acknowledge advertising agriculture alternative
appointment appropriate arrangement association assumption atmosphere
attribution basketball behavioral beneficiary celebration certificate
circumstance combination comfortable commitment communicate
competition complicated composition computation concentrate
conditional confidence connection consequence conservative
considerable consistency constitution consultation consumption
contemporary contribution controversy convenience cooperation
corporation counselling credibility declaration demonstrate deployment
description destination development differently dissertation
distinguish distribution educational effectively electricity
elimination emotionally encouraging engineering environment
established examination exceptional expectation expenditure
experienced explanation extraordinary fundamental furthermore
grandfather grandmother headquarters highlighted hospitality
identification immediately imagination implication importantly
improvement independent individuals information ingredients
institution instruction integration intelligent intervention
legislation maintenance manufacturer measurement neighborhood
observation opportunity orientation participant partnership
performance perspective philosophy photography preparation
prescription presentation preservation presidential probability
professional programming progressive proposition prosecution
publication qualification questionnaire recognition recommended
reflection relationship reliability remarkable replacement
representative reservation residential responsible restriction
satisfaction scholarship significant specialized spokesperson
sophisticated substantial successfully supervision surprisingly
temperature temporarily traditional transaction transformation
translation transmission transportation understanding
unemployment universities unprecedented willingness
accomplishment accountability administration administrative
appreciation approximately architecture characteristic
classification communication comprehensive concentration
configuration consideration constitutional construction
contemporary contribution conversation demonstration
determination developmental disappointment distinguished
documentation effectiveness entertainment environmental
establishment extraordinary infrastructure implementation
independently instructional international interpretation
investigation manufacturing neighbourhood organization
participation particularly pharmaceutical photographer
psychological recommendation representation representative
responsibility simultaneously specification substantially
sustainability technological transportation unfortunately
`

// acronyms replace all-capital runs of two to five letters: common
// acronyms are single tokens where random capitals would be two or three.
const acronyms = `
ID OK US UK EU AI IT PC TV UI UX DB IO OS QA HR PR
API URL CPU GPU SQL SDK CLI DNS TCP UDP SSH TLS SSL RAM USB PDF CSV XML AWS GCP
NBA CEO CFO CTO FAQ ETA DIY VIP ASAP LLM RPC VPN JWT ISO UTC GMT PHP CSS DOM
JSON HTTP HTML YAML REST UUID NASA UNIX ASCII CRUD AJAX OAUTH NGINX REGEX
`

var acronymsByLen = buildWordBuckets(acronyms)

// minWordsPerLength is the least number of words a length bucket must have
// before it is used on its own; shorter buckets borrow by concatenation.
const minWordsPerLength = 4

// wordsByLen[n] lists the dictionary words of n letters.
var wordsByLen = buildWordBuckets(englishWords)

// wordSlots[n] holds wordsByLen[n] (n ≤ maxWordLen) in fixed 16-byte
// slots, so appendWord copies a word with one 16-byte move and no call.
var wordSlots = func() [][]wordSlot {
	if maxWordLen > len(wordSlot{}) {
		panic("redact: a dictionary word is longer than a wordSlot")
	}
	out := make([][]wordSlot, maxWordLen+1)
	for n, b := range wordsByLen[:maxWordLen+1] {
		out[n] = make([]wordSlot, len(b))
		for i, w := range b {
			copy(out[n][i][:], w)
		}
	}
	return out
}()

// wordSlot is a dictionary word padded with zero bytes.
type wordSlot [16]byte

// maxWordLen is the longest bucket used as a whole word; longer letter runs
// are filled by concatenating shorter words.
var maxWordLen = func() int {
	m := 0
	for n, b := range wordsByLen {
		if len(b) >= minWordsPerLength {
			m = n
		}
	}
	return m
}()

func buildWordBuckets(list string) [][]string {
	seen := make(map[string]bool)
	var buckets [][]string
	for _, w := range strings.Fields(list) {
		w = strings.ToLower(w)
		if seen[w] {
			continue
		}
		seen[w] = true
		n := utf8.RuneCountInString(w)
		for len(buckets) <= n {
			buckets = append(buckets, nil)
		}
		buckets[n] = append(buckets[n], w)
	}
	return buckets
}
